"""An upload's refusal is said in the request's language (LocaleMiddleware: the language cookie, then
Accept-Language); its code, its list of supported formats and its audit event stay as they are."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from conversations.models import AuditEvent

from . import samples

pytestmark = pytest.mark.django_db

SUPPORTED = "PDF, XLSX, CSV, JSON, PNG, JPEG"


@pytest.fixture
def upload_in(alice_api, conversation):
    def post(name: str, data: bytes, **headers):
        return alice_api.post(
            f"/api/assistant/conversations/{conversation.pk}/attachments/",
            {"file": SimpleUploadedFile(name, data)},
            format="multipart",
            **headers,
        )

    return post


def test_a_program_that_claims_to_be_a_pdf_is_refused_in_russian(upload_in):
    response = upload_in("invoice.pdf", samples.windows_exe(), HTTP_ACCEPT_LANGUAGE="ru")

    assert response.status_code == 422
    assert response.json() == {
        "error": "invoice.pdf выдаёт себя за другой формат: по имени это PDF-файл, "
        f"а на деле — программа Windows (EXE). Поддерживаются: {SUPPORTED}.",
        "code": "UNPROCESSABLE",
        "supported": ["pdf", "xlsx", "csv", "json", "png", "jpeg"],
    }
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ATTACHMENT_REJECTED)
    assert event.data["reason"] == (
        f"invoice.pdf claims to be a PDF but is a Windows program (EXE). Supported: {SUPPORTED}."
    )


def test_the_language_cookie_chooses_it_and_english_is_the_default(alice_api, upload_in):
    assert upload_in("empty.csv", b"").json()["error"] == "The file is empty."
    alice_api.cookies["django_language"] = "ru"
    unsupported = upload_in("setup.exe", samples.windows_exe(), HTTP_ACCEPT_LANGUAGE="en")
    assert unsupported.status_code == 415
    assert unsupported.json()["error"] == (
        f"Этот файл — программа Windows (EXE), такой формат не поддерживается. Поддерживаются: {SUPPORTED}."
    )
    assert upload_in("empty.csv", b"").json() == {"error": "Файл пуст.", "code": "UNPROCESSABLE"}


def test_a_request_the_api_refuses_is_told_in_russian(alice_api):
    response = alice_api.post(
        "/api/assistant/conversations/00000000-0000-0000-0000-000000000000/attachments/",
        {},
        format="multipart",
        HTTP_ACCEPT_LANGUAGE="ru",
    )

    assert response.status_code == 404
    assert response.json() == {"error": "Не найдено.", "code": "NOT_FOUND"}
