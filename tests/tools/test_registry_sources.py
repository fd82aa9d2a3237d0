"""Tools known only later: a registry source is loaded at the first lookup, and again only while it is not ready."""

from __future__ import annotations

import logging

from pydantic import BaseModel

from tools.registry import Tool, ToolArgs, ToolRegistry


class NoArgs(ToolArgs):
    pass


class LaxArgs(BaseModel):
    pass


def make_tool(name: str, args_model: type[BaseModel] = NoArgs) -> Tool:
    return Tool(name=name, description="A tool.", args_model=args_model, func=lambda args, ctx: None)


def test_a_source_is_loaded_once_at_the_first_lookup():
    registry, calls = ToolRegistry(), []

    def load() -> list[Tool]:
        calls.append(1)
        return [make_tool("later")]

    registry.add_source(load)
    assert calls == []
    assert registry.has("later") and registry.get("later").name == "later"
    assert [tool.name for tool in registry.all()] == ["later"] and len(registry.permitted(None)) == 1
    assert calls == [1]


def test_a_source_not_ready_or_failing_is_asked_again(caplog):
    registry, answers = ToolRegistry(), [None, RuntimeError("down"), [make_tool("later")]]

    def load():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    registry.add_source(load)
    assert not registry.has("later")
    with caplog.at_level(logging.ERROR):
        assert registry.all() == []
    assert "could not load the tools" in caplog.text
    assert registry.has("later") and answers == []


def test_a_source_s_tool_that_lets_unknown_keys_through_is_left_out(caplog):
    registry = ToolRegistry()
    registry.add_source(lambda: [make_tool("lax", LaxArgs), make_tool("strict")])
    with caplog.at_level(logging.ERROR):
        assert [tool.name for tool in registry.all()] == ["strict"]
    assert "lax: the arguments model must" in caplog.text
