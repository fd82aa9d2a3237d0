"""POST /api/assistant/conversations/{id}/attachments/: each supported format read, stored, audited."""

from __future__ import annotations

import hashlib

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from conversations import services
from conversations.models import Attachment, AuditEvent
from conversations.selectors import ConversationFiles
from tools.documents.content import ContentReader

from . import samples

pytestmark = pytest.mark.django_db

GOOD = {
    "report.pdf": (samples.report_pdf, "pdf"),
    "scan.pdf": (samples.scanned_pdf, "pdf"),
    "book.xlsx": (samples.two_sheet_xlsx, "xlsx"),
    "bom.csv": (lambda: samples.csv_bytes(samples.CYRILLIC_ROWS, bom=True), "csv"),
    "ru.csv": (lambda: samples.csv_bytes(samples.CYRILLIC_ROWS, encoding="cp1251", delimiter=";"), "csv"),
    "data.json": (samples.json_bytes, "json"),
    "chart.png": (samples.png_bytes, "png"),
    "photo.jpg": (samples.jpeg_bytes, "jpeg"),
}


@pytest.mark.parametrize(("name", "case"), GOOD.items())
def test_each_supported_format_is_read_and_kept(upload, conversation, alice, name, case):
    make, kind = case
    data = make()

    response = upload(name, data)

    assert response.status_code == 201, response.json()
    body = response.json()
    assert set(body) == {"id", "original_name", "kind", "size", "sha256", "parse_status", "meta", "created_at"}
    assert body["kind"] == kind
    assert body["original_name"] == name
    assert body["size"] == len(data)
    assert body["sha256"] == hashlib.sha256(data).hexdigest()
    assert body["parse_status"] == "parsed"
    stored = Attachment.objects.get(pk=body["id"])
    assert (stored.conversation, stored.owner) == (conversation, alice)
    assert stored.file.read() == data
    assert stored.text
    assert stored.content
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ATTACHMENT_UPLOADED)
    assert event.data == {
        "attachment_id": body["id"],
        "name": name,
        "kind": kind,
        "size": len(data),
        "sha256": body["sha256"],
    }
    assert (event.actor, event.conversation) == (alice, conversation)


def test_meta_tells_pages_sheets_rows_and_image_size(upload):
    assert upload("r.pdf", samples.report_pdf()).json()["meta"] == {
        "pages": 3,
        "pages_read": 3,
        "pages_with_text": 3,
        "tables": 1,
        "text_layer": True,
    }
    sheets = upload("b.xlsx", samples.two_sheet_xlsx()).json()["meta"]["sheets"]
    assert [(sheet["name"], sheet["rows"], sheet["columns"]) for sheet in sheets] == [("Sales", 4, 3), ("Staff", 2, 2)]
    csv_meta = upload("t.csv", samples.csv_bytes(samples.CYRILLIC_ROWS, encoding="cp1251", delimiter=";")).json()[
        "meta"
    ]
    assert (csv_meta["encoding"], csv_meta["delimiter"], csv_meta["rows"]) == ("cp1251", ";", 3)
    image = upload("i.png", samples.png_bytes((64, 48))).json()["meta"]
    assert (image["format"], image["width"], image["height"]) == ("PNG", 64, 48)


def test_the_format_comes_from_the_content_not_the_name(upload):
    assert upload("picture.pdf", samples.png_bytes()).json()["kind"] == "png"
    assert upload("table.xlsx", samples.csv_bytes([("a", "b"), (1, 2)])).json()["kind"] == "csv"
    assert upload("noextension", samples.report_pdf()).json()["kind"] == "pdf"


def test_a_name_is_kept_without_folders_or_control_characters(upload):
    response = upload('../../etc/pa"ss\x07wd.csv', samples.csv_bytes([("a", "b"), (1, 2)]))

    assert response.json()["original_name"] == "pa'sswd.csv"
    assert services.attachment_name("C:\\Users\\me\\report.pdf") == "report.pdf"
    assert services.attachment_name("") == "file"


def test_someone_elses_conversation_is_not_found(upload, bob, alice_api):
    theirs = services.conversation_create(owner=bob)

    response = upload("r.pdf", samples.report_pdf(), to=theirs)

    assert response.status_code == 404
    assert response.json() == {"error": "Not found.", "code": "NOT_FOUND"}
    assert alice_api.get(f"/api/assistant/conversations/{theirs.pk}/attachments/").status_code == 404
    assert not Attachment.objects.exists()


def test_signing_in_is_required(upload, anon_api):
    response = upload("r.pdf", samples.report_pdf(), client=anon_api)

    assert response.status_code == 401
    assert response.json()["code"] == "AUTH_REQUIRED"


def test_a_request_without_a_file_is_invalid(alice_api, conversation):
    response = alice_api.post(
        f"/api/assistant/conversations/{conversation.pk}/attachments/", {"other": "x"}, format="multipart"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "INVALID"
    assert "file" in response.json()["fields"]


def test_a_json_body_is_not_an_upload(alice_api, conversation):
    response = alice_api.post(
        f"/api/assistant/conversations/{conversation.pk}/attachments/", {"file": "x"}, format="json"
    )

    assert response.status_code == 415
    assert response.json()["code"] == "UNSUPPORTED_MEDIA_TYPE"


def test_an_archived_conversation_takes_no_files(upload, conversation, alice):
    services.conversation_archive(conversation=conversation, actor=alice)

    response = upload("r.pdf", samples.report_pdf())

    assert response.status_code == 400
    assert "archived" in response.json()["error"]


def test_a_session_upload_needs_the_csrf_token(client, alice, conversation):
    client.force_login(alice)
    url = f"/api/assistant/conversations/{conversation.pk}/attachments/"
    client.handler.enforce_csrf_checks = True

    response = client.post(url, {"file": SimpleUploadedFile("r.csv", b"a,b\n1,2\n")})

    assert response.status_code == 403
    assert not Attachment.objects.exists()


def test_the_list_shows_the_users_files_newest_first(upload, alice_api, conversation):
    first = upload("a.csv", samples.csv_bytes([("a", "b"), (1, 2)])).json()
    second = upload("b.json", samples.json_bytes()).json()

    response = alice_api.get(f"/api/assistant/conversations/{conversation.pk}/attachments/")

    assert response.status_code == 200
    assert [item["id"] for item in response.json()["results"]] == [second["id"], first["id"]]
    assert response.json()["count"] == 2


def test_the_upload_is_in_the_openapi_schema(alice_api):
    schema = alice_api.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/assistant/conversations/{id}/attachments/"]["post"]

    assert "multipart/form-data" in operation["requestBody"]["content"]
    assert {"201", "413", "415", "422"} <= set(operation["responses"])


def test_nul_characters_inside_a_file_are_not_stored(upload):
    """PostgreSQL refuses them in text and jsonb; they are dropped from what is kept."""
    data = b'[{"na\\u0000me": "a\\u0000b"}]'

    response = upload("nul.json", data)

    assert response.status_code == 201
    assert "\x00" not in Attachment.objects.get().text


def test_half_a_utf16_pair_inside_a_file_is_kept_as_a_replacement_character(upload, alice):
    """Valid JSON, which no database stores and UTF-8 cannot encode: the file is read, the half replaced."""
    data = b'{"rows": [{"name": "half \\ud800 a pair"}], "\\udc00key": "\\ud83d\\ude00"}'

    response = upload("half.json", data)

    assert response.status_code == 201, response.json()
    attachment = Attachment.objects.get()
    assert "half \ufffd a pair" in attachment.text and '"\ufffdkey": "\U0001f600"' in attachment.text
    file = ConversationFiles(attachment.conversation_id, alice).find(str(attachment.pk))
    with file.open() as source:
        reader = ContentReader(source, file.index)
        lines = [line for _, line in reader.units(reader.parts[0])]
    assert '      "name": "half \ufffd a pair"' in lines
