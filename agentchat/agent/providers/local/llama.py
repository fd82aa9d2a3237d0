"""llama.cpp specifics: reading tokens into its cache, scoring and sampling them, and grammars from JSON schemas."""

from __future__ import annotations

import ctypes
import json
import logging
import math
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..base import ToolSchema
from .model import Watch

if TYPE_CHECKING:
    from llama_cpp import Llama, LlamaGrammar

logger = logging.getLogger(__name__)

# Greedy decoding: at 135M parameters, sampling at 0.7 gave visibly worse answers than temperature 0, and greedy
# keeps the tests deterministic. The small repeat penalty keeps greedy text from looping.
# One line: past its first, a 135M model goes on to write the person's side of the conversation too ("Hi" became
# "Hello! | I'm looking for a new hobby…") or a letter's signature ("[Your Name]").
TEXT_SAMPLING: dict[str, Any] = {"temperature": 0.0, "repeat_penalty": 1.1, "stop": ["\n"]}
DECISION_SAMPLING: dict[str, Any] = {"temperature": 0.0}
# A prompt is evaluated in pieces this long, checking for a stop and the deadline in between.
EVAL_CHUNK = 128
# Prompt beginnings whose cache state is kept aside (about 22 KB a token for SmolLM2-135M): restoring one takes a
# millisecond, reading it again takes a second for every 250 tokens on two cores.
SAVED_BEGINNINGS = 4
SAVED_BEGINNING_TOKENS = 1024
# llama-cpp-python's rule for a character inside a JSON string lets control characters through, so a string could
# run on over newlines until max_tokens and leave JSON that does not parse; JSON forbids them unescaped anyway.
STRING_CHAR_RULE = r'char ::= [^"\\] |'
SAFE_STRING_CHAR_RULE = r'char ::= [^"\\\x7F\x00-\x1F] |'
UNSAFE_STRING_CHAR = r'[^"\\]'


class GrammarPatchError(RuntimeError):
    """llama-cpp-python no longer writes the string rule that patch_string_chars replaces."""


def patch_string_chars(grammar: str) -> str:
    """`grammar` with control characters kept out of its JSON strings; one without strings is left as it is.

    Raises GrammarPatchError when the grammar has a string rule that does not read as expected, rather than leave
    it unpatched.
    """
    lines = grammar.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if line.startswith(STRING_CHAR_RULE):
            lines[index] = SAFE_STRING_CHAR_RULE + line[len(STRING_CHAR_RULE) :]
        elif line.startswith("char ::=") or UNSAFE_STRING_CHAR in line:
            raise GrammarPatchError(
                f"llama-cpp-python's JSON-schema grammar changed: expected a rule beginning `{STRING_CHAR_RULE}`, "
                f"found `{line.strip()}`; update patch_string_chars for this llama-cpp-python version"
            )
    return "".join(lines)


def json_grammar(schema: dict[str, Any]) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return patch_string_chars(json_schema_to_gbnf(json.dumps(schema)))


def arguments_grammar(tool: ToolSchema) -> LlamaGrammar:
    """The grammar of one tool's arguments; any JSON object if its schema has none (the orchestrator validates)."""
    from llama_cpp import LlamaGrammar

    try:
        return LlamaGrammar.from_string(json_grammar(tool["parameters"]), verbose=False)
    except GrammarPatchError:
        raise
    except Exception:
        logger.warning("tool %s: arguments schema has no grammar, any object allowed", tool["name"])
        return LlamaGrammar.from_string(json_grammar({"type": "object"}), verbose=False)


def _log_probs(llm: Llama) -> Any:
    """Log-probabilities of the next token after the last one evaluated."""
    import llama_cpp
    import numpy as np

    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
    top = float(logits.max())
    return logits - (top + math.log(float(np.exp(logits - top).sum())))


class SavedBeginnings:
    """The cache states of a few prompt beginnings that many prompts share, most recently used kept.

    llama.cpp's cache holds one sequence: a prompt that parts from the previous one early (another tool list)
    would otherwise read everything after the parting again.
    """

    def __init__(self) -> None:
        self.states: OrderedDict[tuple[int, ...], ctypes.Array[ctypes.c_uint8]] = OrderedDict()

    def save(self, llm: Llama, tokens: list[int]) -> None:
        """Keep the cache's state, which must hold exactly `tokens`."""
        import llama_cpp

        size = llama_cpp.llama_state_seq_get_size(llm.ctx, 0)
        state = (ctypes.c_uint8 * size)()
        if llama_cpp.llama_state_seq_get_data(llm.ctx, state, size, 0) != size:
            return
        self.states[tuple(tokens)] = state
        while len(self.states) > SAVED_BEGINNINGS:
            self.states.popitem(last=False)

    def restore(self, llm: Llama, tokens: list[int], longer_than: int) -> int:
        """Put back the longest saved beginning of `tokens` longer than `longer_than`; how long the cache's
        beginning of `tokens` now is."""
        import llama_cpp

        fits = [saved for saved in self.states if longer_than < len(saved) <= len(tokens)]
        saved = max((saved for saved in fits if tuple(tokens[: len(saved)]) == saved), key=len, default=None)
        if saved is None:
            return longer_than
        self.states.move_to_end(saved)
        state = self.states[saved]
        if llama_cpp.llama_state_seq_set_data(llm.ctx, state, len(state), 0) != len(state):
            del self.states[saved]
            return 0
        llm.input_ids[: len(saved)] = saved
        return len(saved)


_saved_beginnings: weakref.WeakKeyDictionary[Llama, SavedBeginnings] = weakref.WeakKeyDictionary()


def evaluate(llm: Llama, tokens: list[int], watch: Watch, *, keep: int = 0) -> None:
    """Leave exactly `tokens` in llama.cpp's cache, the last one just evaluated (its logits are the next token's).

    The beginning already there, or a longer one saved earlier, is kept; the rest is read in pieces, checking for
    a stop between. `keep`: how long a beginning of `tokens` is worth saving, because other prompts will start
    with it too.
    """
    if len(tokens) >= llm.n_ctx():
        raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {llm.n_ctx()}")
    watch.prompt_tokens = max(watch.prompt_tokens, len(tokens))
    cached = llm.input_ids[: llm.n_tokens]
    kept, most = 0, min(len(cached), len(tokens) - 1)
    while kept < most and cached[kept] == tokens[kept]:
        kept += 1
    beginnings = _saved_beginnings.setdefault(llm, SavedBeginnings())
    kept = beginnings.restore(llm, tokens[:-1], kept)
    llm.n_tokens = kept
    saving = kept < keep < len(tokens) and keep <= SAVED_BEGINNING_TOKENS
    start = kept
    for end in [keep, len(tokens)] if saving else [len(tokens)]:
        for piece in range(start, end, EVAL_CHUNK):
            watch.check()
            llm.eval(tokens[piece : min(piece + EVAL_CHUNK, end)])
            watch.progressed()
        start = end
        if saving and end == keep:
            beginnings.save(llm, tokens[:keep])


def log_likelihoods(llm: Llama, candidates: dict[str, list[int]], watch: Watch) -> dict[str, float]:
    """Each candidate's log-probability of its own tokens, after the beginning that all of them share.

    Candidates are taken in token order, so those sharing a beginning (search_dashboards, search_document)
    read it once; a candidate costs about one token evaluation per token.
    """
    sequences = sorted(candidates.values())
    shared = min(len(sequence) for sequence in sequences)
    for sequence in sequences[1:]:
        shared = next((i for i in range(shared) if sequence[i] != sequences[0][i]), shared)
    log_probs: dict[tuple[int, ...], Any] = {}
    scores: dict[str, float] = {}
    for name, sequence in sorted(candidates.items(), key=lambda item: item[1]):
        tail = sequence[shared:]
        total = 0.0
        for i, token in enumerate(tail):
            seen = tuple(tail[:i])
            if seen not in log_probs:
                evaluate(llm, sequence[: shared + i], watch)
                log_probs[seen] = _log_probs(llm)
            total += float(log_probs[seen][token])
        scores[name] = total
    return scores


def generate(
    llm: Llama,
    prompt: list[int],
    watch: Watch,
    *,
    max_tokens: int,
    sampling: dict[str, Any],
    grammar: LlamaGrammar | None = None,
    on_text: Callable[[str], None] | None = None,
) -> tuple[str, str]:
    """Run one completion, checking for a stop and the deadline at every token. Returns (text, finish_reason)."""
    # Read first in pieces that a stop can come between; llama.cpp then finds the whole prompt in its cache.
    evaluate(llm, prompt, watch)
    pieces: list[str] = []
    finish_reason = "stop"
    chunks: Iterator[Any] = llm.create_completion(
        prompt=prompt, stream=True, max_tokens=max_tokens, grammar=grammar, **sampling
    )
    try:
        for chunk in chunks:
            watch.check()
            watch.progressed()
            choice = chunk["choices"][0]
            piece = choice["text"]
            if piece:
                pieces.append(piece)
                if on_text is not None:
                    on_text(piece)
            finish_reason = choice.get("finish_reason") or finish_reason
    finally:
        close = getattr(chunks, "close", None)  # frees llama.cpp's generation state at once on an early stop
        if close is not None:
            close()
    text = "".join(pieces)
    watch.completion_tokens += len(llm.tokenize(text.encode(), add_bos=False)) if text else 0
    return text, finish_reason
