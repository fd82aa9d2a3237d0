"""The conversation as the model reads it: plain role/content turns, rendered by the GGUF's chat template."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ..base import ChatMessage

if TYPE_CHECKING:
    from llama_cpp import Llama


def to_chatml_messages(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """History in plain role/content turns; the GGUF's ChatML template passes any role name through."""
    wire: list[dict[str, str]] = []
    call_names: dict[str, str] = {}
    calls_in_last_turn = 0
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            call_names.update((call["id"], call["name"]) for call in calls)
            calls_in_last_turn = len(calls)
            # A past call is told in words. Shown as the JSON a decision writes, SmolLM2 answered a tool result
            # by writing that JSON again (3 times in 5 tries) instead of words (0 in 5 this way).
            lines = [message["content"]] if message["content"] else []
            lines.append(f"Calling {', '.join(call['name'] for call in calls)}.")
            wire.append({"role": "assistant", "content": "\n".join(lines)})
        elif message["role"] == "tool":
            # A `tool` turn holding the bare result read best to SmolLM2 (it answered from the result); prefixing
            # the tool's name, or sending the result as a user or system turn with "answer in words", made it
            # repeat the result instead. The name is given only when one turn made several calls and the results
            # would otherwise be ambiguous.
            content = message["content"]
            if calls_in_last_turn > 1:
                name = message.get("name") or call_names.get(message.get("tool_call_id", ""), "tool")
                content = f"{name}: {content}"
            wire.append({"role": "tool", "content": content})
        else:
            wire.append({"role": message["role"], "content": message["content"]})
    return wire


@functools.lru_cache(maxsize=8)
def _template_formatter(template: str, eos_token: str, bos_token: str, open_turn: bool) -> Any:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    return Jinja2ChatFormatter(
        template=template, eos_token=eos_token, bos_token=bos_token, add_generation_prompt=open_turn
    )


def _token_text(llm: Llama, token: int) -> str:
    return llm.detokenize([token], special=True).decode("utf-8", "ignore") if token >= 0 else ""


def chat_prompt(llm: Llama, messages: list[dict[str, str]], *, open_turn: bool = True) -> str:
    """The messages in the GGUF's own chat template, as llama.cpp renders it for a chat completion (ChatML when
    the file has none), the assistant's turn opened unless `open_turn` is false (the beginning of a longer
    prompt)."""
    template = llm.metadata.get("tokenizer.chat_template")
    if template:
        eos, bos = _token_text(llm, llm.token_eos()), _token_text(llm, llm.token_bos())
        return _template_formatter(template, eos, bos, open_turn)(messages=messages).prompt
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + ("<|im_start|>assistant\n" if open_turn else "")


def prompt_tokens(llm: Llama, prompt: str) -> list[int]:
    # Special tokens are read as such and no BOS is added: the template writes it if the model wants one.
    return llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
