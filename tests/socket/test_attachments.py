"""Attachments end to end: uploaded over HTTP, sent with a message frame through the real socket, seen by the fake
provider, and read by the document tools the scripted model calls (docs/tools.md)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile

from conversations import services
from tests.conftest import bearer_client
from tests.fake_provider import Reply
from tests.tools.documents import samples

from .test_runs import ask, of, settle

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
async def _runs(monkeypatch, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    yield
    await settle()


@sync_to_async
def upload(user, conversation, name: str, data: bytes) -> dict:
    response = bearer_client(user).post(
        f"/api/assistant/conversations/{conversation.pk}/attachments/",
        {"file": SimpleUploadedFile(name, data)},
        format="multipart",
    )
    assert response.status_code == 201, response.content[:300]
    return response.json()


async def test_the_pdf_text_reaches_the_provider_with_the_question(llm, sockets, conversation, alice):
    report = await upload(alice, conversation, "report.pdf", samples.report_pdf())
    llm.script(Reply(text="Главный риск: задержка поставщика."))
    socket = await sockets(conversation, alice)

    frames = await ask(socket, "выдели риски", "c1", attachments=[report["id"]])

    assert frames[-1]["status"] == "completed"
    assert frames[0]["message"]["attachments"] == [report["id"]]
    system, user = llm.requests[0].messages
    assert system["role"] == "system"
    assert f"- id {report['id']}: PDF, 3 pages" in system["content"]
    assert "report.pdf" not in system["content"]  # the name is the user's words: it comes with their message
    assert user["role"] == "user"
    assert user["content"].startswith("выдели риски\n\n--- Attached files")
    assert '[File "report.pdf"' in user["content"]
    assert "=== Page 2 of 3 ===\nRisk register" in user["content"]
    assert "| Supplier delay | Procurement | High |" in user["content"]
    assert "Mitigate the supplier delay before the next audit." in user["content"]
    tool_names = {tool["function"]["name"] for tool in llm.requests[0].tools}
    assert {"read_document", "search_document", "query_table"} <= tool_names


async def test_the_table_tool_reads_row_5000_of_a_large_csv(llm, sockets, conversation, alice):
    table = await upload(alice, conversation, "big.csv", samples.large_csv(6_000))
    query = {"attachment_id": table["id"], "filters": [{"column": "_row", "op": "eq", "value": 5000}]}
    llm.script(Reply(tool_calls=[("query_table", query, "call-1")]), Reply(text="Row 5000 is CODE-5000, in Lima."))
    socket = await sockets(conversation, alice)

    frames = await ask(socket, "What is in row 5,000?", "c2", attachments=[table["id"]])

    assert frames[-1]["status"] == "completed"
    (end,) = of(frames, "tool_end")
    assert end["tool"] == "query_table"
    assert "| 5000 | 4999 | CODE-5000 | Lima | 50000 |" in end["output"]
    # The provider saw only the first rows with the message, and the tool's answer in the next round.
    first_request, second_request = llm.requests
    assert "CODE-5000" not in first_request.messages[1]["content"]
    assert "[Shown: the first 50 of 6,000 rows" in first_request.messages[1]["content"]
    tool_message = second_request.messages[-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call-1"
    assert "CODE-5000" in tool_message["content"]


async def test_someone_elses_attachment_cannot_be_sent(llm, sockets, conversation, alice, bob):
    theirs = await sync_to_async(services.conversation_create)(owner=bob)
    their_file = await upload(bob, theirs, "bob.csv", samples.csv_bytes([("a", "b"), (1, 2)]))
    socket = await sockets(conversation, alice)

    await socket.send({"type": "message", "content": "look", "attachments": [their_file["id"]]})
    frame = await socket.receive()

    assert frame["type"] == "error" and frame["code"] == "NOT_FOUND"
    assert llm.requests == []
