from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.fake_provider import Reply


@pytest.mark.django_db
def test_runs_one_turn_and_prints_its_events(llm):
    llm.script(Reply(text="Hello there!"))
    out = StringIO()
    call_command("agent_ask", "Hi", "--json", "--context", '{"focus": {"type": "dashboard", "id": 42}}', stdout=out)
    frames = [json.loads(line) for line in out.getvalue().splitlines()]
    assert "".join(f["delta"] for f in frames if f["type"] == "token") == "Hello there!"
    assert frames[-1]["type"] == "run_finished" and frames[-1]["status"] == "completed"
    assert "dashboard 42" in llm.requests[0].messages[0]["content"]


@pytest.mark.django_db
def test_unknown_user_and_missing_configuration_are_clear_errors(llm, settings):
    with pytest.raises(CommandError, match="No user named 'carol'"):
        call_command("agent_ask", "Hi", "--user", "carol")
    settings.LLM_API_KEY = ""
    with pytest.raises(CommandError, match="LLM_API_KEY is missing"):
        call_command("agent_ask", "Hi")
