"""Token counting, history trimming and long-message truncation (docs/architecture.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

from agentchat import tokens
from agentchat.agent import context
from agentchat.agent.context import (
    MESSAGE_OVERHEAD,
    TRUNCATION_LIMIT,
    TRUNCATION_SUFFIX,
    Trimmed,
    fit_history,
    marker_message,
    message_tokens,
    truncate_message,
)
from agentchat.agent.providers import ChatMessage
from agentchat.tokens import count_tokens


def user(text: str) -> ChatMessage:
    return {"role": "user", "content": text}


def assistant(text: str) -> ChatMessage:
    return {"role": "assistant", "content": text}


def calling(*ids: str) -> ChatMessage:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "name": "get_asset", "args": {"assetId": call_id}} for call_id in ids],
    }


def result(call_id: str, text: str = "ok") -> ChatMessage:
    return {"role": "tool", "content": text, "tool_call_id": call_id, "name": "get_asset"}


def cost(*messages: ChatMessage) -> int:
    return sum(message_tokens(message) for message in messages)


def words(n: int) -> str:
    return " ".join(["word"] * n)  # " word" is one token in cl100k_base, so n words are n tokens


ROOT = Path(__file__).resolve().parents[2]
OFFLINE_SCRIPT = """
import socket

def refuse(*args, **kwargs):
    raise OSError("network is off in this test")

socket.socket.connect = refuse
socket.create_connection = refuse

from agentchat.tokens import count_tokens

print(count_tokens("hello world"))
"""


def test_counting_loads_offline_in_a_fresh_process(tmp_path):
    # A fresh interpreter with an empty tiktoken cache, so nothing loaded earlier can hide a download.
    nowhere = "http://127.0.0.1:9"
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path), "HTTPS_PROXY": nowhere, "HTTP_PROXY": nowhere}
    done = subprocess.run(  # noqa: S603 - our own interpreter running a fixed script
        [sys.executable, "-c", OFFLINE_SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"


def test_counting_is_deterministic():
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0
    assert count_tokens(words(50)) == 50
    assert count_tokens("<|endoftext|>") > 1  # special tokens in user text are plain text


def test_a_long_text_is_encoded_once_and_counted_alike_after(monkeypatch):
    encoded: list[str] = []
    encode = tokens._encoded_length
    monkeypatch.setattr(tokens, "_encoded_length", lambda text: encoded.append(text) or encode(text))
    text = f"{uuid.uuid4()} " + words(200)
    surrogate = f"{uuid.uuid4()} \ud800 " + words(200)  # a lone surrogate, as a JSON frame may carry

    assert [count_tokens(text), count_tokens(text)] == [encode(text)] * 2
    assert [count_tokens(surrogate), count_tokens(surrogate)] == [encode(surrogate)] * 2
    assert encoded == [text, surrogate]
    assert count_tokens("hello world") == count_tokens("hello world") == 2
    assert encoded == [text, surrogate, "hello world", "hello world"]  # short texts are not kept


def test_a_long_history_is_counted_from_its_newest_unit_back_to_the_first_that_does_not_fit(monkeypatch):
    counted: list[str] = []
    monkeypatch.setattr(context, "count_tokens", lambda text: counted.append(text) or count_tokens(text))
    history = [message for n in range(500) for message in (user(f"question {n}"), assistant(f"answer {n}"))]
    history.append(user("the newest question"))

    budget = cost(*history[-4:]) + cost(marker_message(997))
    counted.clear()

    trimmed = fit_history(history, budget=budget)

    assert trimmed.messages == [marker_message(997), *history[-4:]]
    texts = [text for text in counted if not text.startswith("[")]  # not the marker's
    assert texts == [message["content"] for message in reversed(history)][: len(texts)]
    assert 5 <= len(texts) < 12  # of 1,001


def test_message_tokens_counts_content_tool_calls_and_overhead():
    assert message_tokens(user("hello world")) == MESSAGE_OVERHEAD + 2
    arguments = count_tokens(json.dumps({"assetId": "a1"}))
    assert message_tokens(calling("a1")) == MESSAGE_OVERHEAD + count_tokens("get_asset") + arguments


def test_everything_under_budget_is_kept_without_marker():
    history = [user("hi"), assistant("hello"), user("how are you?")]
    trimmed = fit_history(history, budget=cost(*history))
    assert trimmed == Trimmed(messages=history, dropped=0)
    assert fit_history([], budget=10) == Trimmed(messages=[], dropped=0)


def test_oldest_are_dropped_behind_a_marker_counting_them():
    history = [user(words(100)), assistant(words(100)), user(words(100)), assistant(words(10)), user(words(10))]
    budget = cost(*history[3:]) + cost(marker_message(3)) + 5
    trimmed = fit_history(history, budget=budget)
    assert trimmed.dropped == 3
    assert trimmed.messages == [marker_message(3), *history[3:]]
    assert trimmed.messages[0]["content"] == "[3 earlier messages were left out to fit the context budget.]"
    assert cost(*trimmed.messages) <= budget


def test_the_marker_must_fit_too():
    history = [user(words(50)), assistant(words(10)), user(words(10))]
    # Room for the older assistant message, but not for it and the marker together.
    trimmed = fit_history(history, budget=cost(*history[1:]) + 1)
    assert trimmed.messages == [marker_message(2), history[2]]
    assert trimmed.messages[0]["content"] == "[2 earlier messages were left out to fit the context budget.]"
    assert marker_message(1)["content"] == "[1 earlier message was left out to fit the context budget.]"


def test_newest_turn_is_kept_even_alone_over_budget():
    history = [user("earlier"), assistant("reply"), user(words(500)), calling("c1"), result("c1", words(300))]
    trimmed = fit_history(history, budget=50)
    assert trimmed.dropped == 2
    assert trimmed.messages == [marker_message(2), *history[2:]]

    alone = fit_history([user(words(500))], budget=50)
    assert alone == Trimmed(messages=[user(words(500))], dropped=0)


def test_tool_call_and_its_results_are_never_split():
    history = [
        user(words(50)),
        calling("a", "b"),
        result("a", words(40)),
        result("b", words(40)),
        assistant("old answer"),
        user("new question"),
    ]
    # The results and the answer fit; the assistant message that made the calls does not.
    budget = cost(*history[2:]) + cost(marker_message(4)) + 2
    assert budget < cost(*history[1:]) + cost(marker_message(1))
    trimmed = fit_history(history, budget=budget)
    assert trimmed.messages == [marker_message(4), history[4], history[5]]
    assert trimmed.dropped == 4
    assert all(message["role"] != "tool" for message in trimmed.messages)

    whole = fit_history(history, budget=cost(*history[1:]) + cost(marker_message(1)))
    assert whole.messages == [marker_message(1), *history[1:]]
    assert whole.messages[1]["role"] == "assistant"


def test_first_kept_message_is_never_a_tool_result():
    history = [calling("lost"), result("lost"), user("question"), assistant("answer"), user("next")]
    for budget in range(0, cost(*history) + 20):
        kept = [message for message in fit_history(history, budget=budget).messages if message["role"] != "system"]
        assert kept[0]["role"] != "tool"
        for i, message in enumerate(kept):
            if message["role"] == "tool":
                assert any(message["tool_call_id"] in [c["id"] for c in m.get("tool_calls", [])] for m in kept[:i])


def test_leading_orphan_tool_results_are_left_out():
    history = [result("gone"), assistant("answer"), user("next")]
    trimmed = fit_history(history, budget=10_000)
    assert trimmed.messages == [marker_message(1), *history[1:]]
    assert trimmed.dropped == 1


def test_kept_history_is_contiguous():
    history = [user(words(5)), assistant(words(5)), user(words(5)), assistant(words(200)), user(words(5))]
    # The two oldest would fit in what is left, but skipping the big one would leave a hole.
    trimmed = fit_history(history, budget=cost(history[-1], *history[:3], marker_message(4)) + 10)
    assert trimmed.messages == [marker_message(4), history[-1]]
    assert trimmed.dropped == 4


def test_system_prompt_counts_against_the_budget():
    history = [user(words(20)), assistant(words(20)), user(words(20))]
    budget = cost(*history) + cost(marker_message(2))
    assert fit_history(history, budget=budget).dropped == 0
    prompt = words(30)
    trimmed = fit_history(history, budget=budget, system_prompt=prompt)
    assert trimmed.dropped == 2
    assert trimmed.messages == [marker_message(2), history[2]]
    assert message_tokens({"role": "system", "content": prompt}) + cost(*trimmed.messages) <= budget


def test_history_without_user_message_keeps_its_last_unit():
    history = [assistant(words(100)), calling("x"), result("x", words(5))]
    trimmed = fit_history(history, budget=cost(*history[1:]) + cost(marker_message(1)))
    assert trimmed.messages == [marker_message(1), *history[1:]]


def test_long_message_is_cut_at_a_sentence_boundary():
    sentence = "This sentence has exactly some words in it, more or less. "
    text = sentence * (200_000 // len(sentence) + 1)
    assert len(text) > 200_000

    cut, truncated = truncate_message(text)
    assert truncated
    assert cut.endswith(TRUNCATION_SUFFIX)
    kept = cut.removesuffix(TRUNCATION_SUFFIX)
    assert len(kept) <= TRUNCATION_LIMIT
    assert len(kept) > TRUNCATION_LIMIT - len(sentence)
    assert text.startswith(kept)
    assert kept.endswith("more or less.")
    assert kept.endswith(sentence.strip())


def test_newline_and_cjk_sentence_ends_are_boundaries():
    lines = ("a line without a full stop\n" * 10)[:-1] + "x" * 100
    assert truncate_message(lines, limit=200)[0] == ("a line without a full stop\n" * 7).rstrip() + TRUNCATION_SUFFIX
    cjk = "这是一个句子。" * 10
    assert truncate_message(cjk, limit=30)[0] == "这是一个句子。" * 4 + TRUNCATION_SUFFIX


def test_without_sentence_end_it_cuts_at_whitespace_then_hard():
    spaced = "abcdefghi " * 20
    cut, truncated = truncate_message(spaced, limit=55)
    assert truncated
    assert cut == spaced[:49] + TRUNCATION_SUFFIX

    solid = "x" * 200_000
    cut, truncated = truncate_message(solid)
    assert truncated
    assert cut == "x" * TRUNCATION_LIMIT + TRUNCATION_SUFFIX


def test_sentence_end_far_from_the_limit_is_ignored():
    text = "Short. " + "x" * 5_000
    assert truncate_message(text, limit=4_000)[0] == "Short. " + "x" * 3_993 + TRUNCATION_SUFFIX


def test_text_at_or_under_the_limit_is_unchanged():
    assert truncate_message("Hello. World.") == ("Hello. World.", False)
    exact = "y" * TRUNCATION_LIMIT
    assert truncate_message(exact) == (exact, False)
