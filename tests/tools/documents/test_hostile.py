"""Hostile and broken files: each gets its defined answer, is not kept, is audited, and the server answers the
next request right after (docs/tools.md)."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.files.uploadhandler import StopUpload

from conversations import services
from conversations.api.uploads import MULTIPART_SLACK, UploadLimitHandler
from conversations.models import Attachment, AuditEvent
from conversations.services.attachments import READING
from tests.conftest import bearer_client
from tools.documents.limits import MAX_UPLOAD_BYTES, SUPPORTED

from . import samples

pytestmark = pytest.mark.django_db

SUPPORTED_LIST = list(SUPPORTED)


def assert_rejected(response, status: int, code: str, *words: str) -> dict:
    assert response.status_code == status, response.content[:500]
    body = response.json()
    assert body["code"] == code
    for word in words:
        assert word in body["error"], body["error"]
    assert not Attachment.objects.exists()
    return body


def assert_still_serving(upload) -> None:
    """Another request, right after: the server (and its readers) still answer."""
    response = upload("after.csv", samples.csv_bytes([("a", "b"), (1, 2)]))
    assert response.status_code == 201, response.content[:500]
    Attachment.objects.all().delete()


def test_ten_megabytes_and_one_byte_is_too_large(upload):
    response = upload("big.csv", b"a" * (MAX_UPLOAD_BYTES + 1))

    assert_rejected(response, 413, "TOO_LARGE", "10 MB")
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ATTACHMENT_REJECTED)
    assert event.data["code"] == "TOO_LARGE"
    assert_still_serving(upload)


def test_exactly_ten_megabytes_is_accepted(upload):
    data = b'{"s": "' + b"x" * (MAX_UPLOAD_BYTES - 9) + b'"}'
    assert len(data) == MAX_UPLOAD_BYTES

    response = upload("limit.json", data)

    assert response.status_code == 201, response.content[:300]
    assert response.json()["size"] == MAX_UPLOAD_BYTES


def test_a_body_declared_too_large_is_refused_before_it_is_read(alice_api, conversation, upload):
    """Only the declared length is looked at: the body here is small, and is never parsed."""
    url = f"/api/assistant/conversations/{conversation.pk}/attachments/"
    body = b'--x\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\na,b\r\n--x--\r\n'

    response = alice_api.generic(
        "POST",
        url,
        body,
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH=str(MAX_UPLOAD_BYTES + MULTIPART_SLACK + 1),
    )

    assert_rejected(response, 413, "TOO_LARGE")
    assert_still_serving(upload)


def test_the_limit_counts_what_streams_in_whatever_the_length_says():
    handler = UploadLimitHandler(limit=10)

    assert handler.receive_data_chunk(b"12345", 0) == b"12345"
    assert handler.receive_data_chunk(b"67890", 5) == b"67890"
    with pytest.raises(StopUpload):
        handler.receive_data_chunk(b"x", 10)
    assert handler.exceeded
    assert not UploadLimitHandler(limit=10).body_too_large(None)


def test_a_program_named_pdf_claims_a_format_it_is_not(upload):
    response = upload("invoice.pdf", samples.windows_exe())

    body = assert_rejected(
        response, 422, "UNPROCESSABLE", "invoice.pdf claims to be a PDF but is a Windows program", "PDF, XLSX"
    )
    assert body["supported"] == SUPPORTED_LIST
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ATTACHMENT_REJECTED)
    assert event.data["name"] == "invoice.pdf"
    assert event.data["status"] == 422


def test_a_program_under_its_own_name_is_unsupported(upload):
    body = assert_rejected(upload("setup.exe", samples.windows_exe()), 415, "UNSUPPORTED_MEDIA_TYPE", "Windows program")
    assert body["supported"] == SUPPORTED_LIST
    assert_still_serving(upload)


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("archive.zip", samples.plain_zip(), ["ZIP archive"]),
        ("notes.txt", "Просто текст без таблицы.\nИ вторая строка.\n".encode(), ["plain text"]),
        ("blob.bin", bytes(range(256)) * 8, ["binary"]),
        ("anim.gif", b"GIF89a" + bytes(64), ["GIF"]),
    ],
)
def test_other_formats_get_415_with_the_supported_list(upload, name, data, words):
    body = assert_rejected(upload(name, data), 415, "UNSUPPORTED_MEDIA_TYPE", *words)

    assert body["supported"] == SUPPORTED_LIST
    assert_still_serving(upload)


def test_an_xlsx_zip_bomb_is_refused_before_it_is_opened(upload, zip_bomb):
    assert len(zip_bomb) < MAX_UPLOAD_BYTES

    assert_rejected(upload("bomb.xlsx", zip_bomb), 422, "UNPROCESSABLE", "zip bomb", "300 MB")
    assert_still_serving(upload)


def test_an_xlsx_part_that_unpacks_too_many_times_larger_is_refused(upload):
    small_bomb = samples.zip_bomb_xlsx(unpacked=20 * 1024 * 1024)

    assert_rejected(upload("bomb.xlsx", small_bomb), 422, "UNPROCESSABLE", "times larger", "zip bomb")
    assert_still_serving(upload)


def test_a_billion_laughs_xlsx_is_refused(upload):
    assert_rejected(upload("laughs.xlsx", samples.billion_laughs_xlsx()), 422, "UNPROCESSABLE", "billion-laughs")
    assert_still_serving(upload)


def test_a_pdf_with_circular_references_is_stopped_at_the_time_limit(upload, settings):
    settings.DOCUMENT_PARSE_TIMEOUT = 1

    assert_rejected(upload("loop.pdf", samples.circular_pdf()), 422, "UNPROCESSABLE", "longer than 1 seconds")
    assert_still_serving(upload)


def test_a_pdf_of_nested_drawings_is_given_up_within_seconds(upload):
    """A few KB that would hold a reader for minutes: its one page gets its two seconds of processor time."""
    assert_rejected(
        upload("nested.pdf", samples.nested_xobjects_pdf()), 422, "UNPROCESSABLE", "it took more than 2 seconds"
    )
    assert_still_serving(upload)


def test_files_being_read_at_once_are_limited_per_person(settings, alice, bob, upload, bob_api):
    settings.UPLOAD_PARSES_PER_USER = 1
    bobs = services.conversation_create(owner=bob)
    with READING.hold(alice.pk, 1):  # a file of alice's is being read, on this process or another
        body = assert_rejected(upload("second.csv", samples.csv_bytes([("a",), (1,)])), 429, "RATE_LIMITED")
        assert "Too many of your files are being read at once (at most 1)" in body["error"]
        assert upload("bobs.csv", samples.csv_bytes([("a",), (1,)]), to=bobs, client=bob_api).status_code == 201
    Attachment.objects.all().delete()
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ATTACHMENT_REJECTED)
    assert event.data["code"] == "RATE_LIMITED"
    assert_still_serving(upload)


def test_a_20000_by_20000_png_is_a_decompression_bomb(upload, huge_png):
    assert_rejected(upload("huge.png", huge_png), 422, "UNPROCESSABLE", "20,000 × 20,000", "decompression bomb")
    assert_still_serving(upload)


def test_a_truncated_jpeg_is_damaged(upload):
    assert_rejected(upload("cut.jpg", samples.truncated_jpeg()), 422, "UNPROCESSABLE", "JPEG", "truncated")
    assert_still_serving(upload)


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("secret.pdf", samples.encrypted_pdf(), ["encrypted", "password"]),
        ("broken.pdf", b"%PDF-1.4\n" + b"garbage " * 100, ["PDF"]),
        ("deep.json", samples.deep_json(5_000), ["nests deeper"]),
        ("bad.json", b'{"a": [1, 2,, 3]}', ["not valid JSON", "line 1"]),
        ("empty.csv", b"", ["empty"]),
        ("fake.xlsx", b"PK\x03\x04" + bytes(100), ["ZIP", "broken"]),
        ("cut.png", samples.png_bytes((300, 300))[:200], ["PNG"]),
    ],
)
def test_files_that_are_not_what_they_claim_get_422_with_the_reason(upload, name, data, words):
    assert_rejected(upload(name, data), 422, "UNPROCESSABLE", *words)
    assert_still_serving(upload)


@pytest.mark.django_db(transaction=True)
def test_other_requests_are_answered_while_a_hostile_file_is_being_read(settings, alice, alice_api, conversation):
    """The circular PDF spins in its child until the time limit; meanwhile the server answers a list request.

    The limit leaves a busy machine time to answer the list first: with 1 s it sometimes did not."""
    settings.DOCUMENT_PARSE_TIMEOUT = 3
    url = f"/api/assistant/conversations/{conversation.pk}/attachments/"

    async def both():
        # Each request in a worker thread of its own, whose connection is closed after it: the test client leaves
        # it open, and open in a thread that ends it would keep PostgreSQL from dropping the test database.
        post = database_sync_to_async(alice_api.post, thread_sensitive=False)(
            url, {"file": SimpleUploadedFile("loop.pdf", samples.circular_pdf())}, format="multipart"
        )
        task = asyncio.ensure_future(post)
        await asyncio.sleep(0.2)
        listed = await database_sync_to_async(bearer_client(alice).get, thread_sensitive=False)(url)
        return listed, task.done(), await task

    listed, upload_done_first, response = asyncio.run(both())

    assert listed.status_code == 200
    assert not upload_done_first
    assert_rejected(response, 422, "UNPROCESSABLE", "longer than 3 seconds")
