from __future__ import annotations

import pytest

from tests.fake_provider import Reply

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_message_streams_an_answer(llm, sockets, conversation, alice):
    llm.script(Reply(text="Hello there, Alice!"))
    socket = await sockets(conversation, alice)
    assert socket.ready["run"] is None
    await socket.send({"type": "message", "content": "Hi", "client_id": "c1"})
    frames = await socket.receive_until("run_finished")
    kinds = [f["type"] for f in frames]
    print(kinds)
    assert kinds[0] == "message" and frames[0]["client_id"] == "c1"
    assert "".join(f["delta"] for f in frames if f["type"] == "token") == "Hello there, Alice!"
    assert frames[-1]["status"] == "completed"
