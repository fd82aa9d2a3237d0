from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from conversations import services

from . import samples


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def conversation(alice):
    return services.conversation_create(owner=alice, title="Files")


def attach(conversation, name: str, data: bytes):
    """Upload through the service, as the endpoint does."""
    return services.attachment_upload(
        conversation=conversation, owner=conversation.owner, upload=SimpleUploadedFile(name, data)
    )


@pytest.fixture
def upload(alice_api, conversation):
    """POST a file to the conversation's attachments endpoint as alice."""

    def post(name: str, data: bytes, *, to=None, client=None):
        target = to or conversation
        return (client or alice_api).post(
            f"/api/assistant/conversations/{target.pk}/attachments/",
            {"file": SimpleUploadedFile(name, data)},
            format="multipart",
        )

    return post


@pytest.fixture(scope="session")
def zip_bomb() -> bytes:
    return samples.zip_bomb_xlsx()


@pytest.fixture(scope="session")
def huge_png() -> bytes:
    return samples.huge_png()
