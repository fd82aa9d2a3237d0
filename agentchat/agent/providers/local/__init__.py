"""The default provider: a GGUF model run in-process by llama.cpp, the packaged SmolLM2-135M unless LLM_MODEL names one.

Nothing is ever downloaded. The model is loaded once per process and path, on first use (model.py). One generation
runs at a time per process, in a worker thread that hands its tokens to the event loop and stops at the next token
once nobody is listening (model.py, provider.py).

When the last message is the user's and tools are offered, a decision comes first (routing.py): the closest examples
are shown, the offered names and "none" are scored, and the winner's arguments are generated under a grammar made
from its schema (llama.py). A tool call is answered as such; "none" (or arguments cut short) is followed by an
ordinary streamed answer from the conversation in the model's chat template (chatml.py).

Letting the model write the whole call, grammar-bound, chose right 3 times in 20 on the first tuning set of
tests/eval/test_routing.py: it named dashboard_health for nearly everything, with a made-up id.
"""

from __future__ import annotations

from .chatml import to_chatml_messages
from .llama import GrammarPatchError, arguments_grammar
from .model import CONTEXT_WINDOW, packaged_model_path, resolve_model_path
from .provider import LocalProvider
from .routing import choose_examples, parse_decision

__all__ = [
    "CONTEXT_WINDOW",
    "GrammarPatchError",
    "LocalProvider",
    "arguments_grammar",
    "choose_examples",
    "packaged_model_path",
    "parse_decision",
    "resolve_model_path",
    "to_chatml_messages",
]
