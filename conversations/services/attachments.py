"""Files a person attaches: checked, read in a sandboxed child process, stored."""

from __future__ import annotations

import hashlib
import os
import tempfile
import unicodedata
from pathlib import PurePosixPath, PureWindowsPath

from django.conf import settings
from django.core.files import File
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from agentchat.text import storable
from tools.documents import sandbox
from tools.documents.exceptions import DocumentError, FileTooLarge, TooManyReads
from tools.documents.limits import DEFAULT_LIMITS, MAX_UPLOAD_BYTES, MiB

from ..models import Attachment, AuditEvent, Conversation
from ..ratelimit import Full, SharedSlots
from .audit import audit_record

EXTENSIONS = {"pdf": "pdf", "xlsx": "xlsx", "csv": "csv", "json": "json", "png": "png", "jpeg": "jpg"}

NAME_LENGTH = 255

# Long enough to outlast any read: a process killed mid-read gives its slot back this long after.
READING = SharedSlots("reading", seconds=3600)


def attachment_name(raw: str | None) -> str:
    """The name a person gave the file, made safe to show and to quote: no folders, no control characters."""
    name = PureWindowsPath(PurePosixPath(raw or "").name).name
    name = "".join(char for char in name if unicodedata.category(char)[0] != "C")
    name = " ".join(name.replace('"', "'").split())
    return name[:NAME_LENGTH] or "file"


def attachment_reject(*, conversation: Conversation, owner, name: str, size: int, error: DocumentError, **data) -> None:
    audit_record(
        kind=AuditEvent.Kind.ATTACHMENT_REJECTED,
        actor=owner,
        conversation=conversation,
        data={"name": name, "size": size, "status": error.status, "code": error.code, "reason": error.message, **data},
    )


def _copy_hashing(upload: UploadedFile, path: str) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "wb") as copy:
        for chunk in upload.chunks():
            size += len(chunk)
            if size > MAX_UPLOAD_BYTES:
                raise FileTooLarge(f"The file is larger than {MAX_UPLOAD_BYTES // MiB} MB.")
            digest.update(chunk)
            copy.write(chunk)
    return size, digest.hexdigest()


def _parse_budget() -> sandbox.Budget:
    return sandbox.Budget(
        seconds=settings.DOCUMENT_PARSE_TIMEOUT,
        memory_bytes=settings.DOCUMENT_PARSE_MEMORY_MB * MiB,
        file_bytes=DEFAULT_LIMITS.content_bytes,
    )


def attachment_upload(*, conversation: Conversation, owner, upload: UploadedFile) -> Attachment:
    """Check, read (in a child process, within the time and memory limits) and store a file; audited either way.

    A file that is rejected (DocumentError: too large, unsupported, unreadable) is not kept.
    """
    # Here, not at the top: the parser libraries are loaded by the server only once someone uploads a file.
    from tools.documents.parsing import parse_file

    name = attachment_name(upload.name)
    size, sha256 = upload.size or 0, ""
    with tempfile.TemporaryDirectory(prefix="agentchat-upload-") as workdir:
        source, content = os.path.join(workdir, "source"), os.path.join(workdir, "content")
        try:
            size, sha256 = _copy_hashing(upload, source)
            with READING.hold(owner.pk, settings.UPLOAD_PARSES_PER_USER):
                parsed = sandbox.run(parse_file, source, content, name, DEFAULT_LIMITS, budget=_parse_budget())
        except Full:
            error = TooManyReads(
                f"Too many of your files are being read at once (at most {settings.UPLOAD_PARSES_PER_USER}). "
                "Wait until one of them is done, then upload this one again."
            )
            attachment_reject(conversation=conversation, owner=owner, name=name, size=size, error=error, sha256=sha256)
            raise error from None
        except DocumentError as error:
            attachment_reject(conversation=conversation, owner=owner, name=name, size=size, error=error, sha256=sha256)
            raise
        attachment = Attachment(
            conversation=conversation,
            owner=owner,
            original_name=name,
            kind=parsed.kind,
            size=size,
            sha256=sha256,
            text=storable(parsed.text),
            meta=storable(parsed.meta),
            index=storable(parsed.index),
            parse_status=Attachment.ParseStatus.PARSED,
        )
        stem = str(attachment.pk)
        with open(source, "rb") as original:
            attachment.file.save(f"{stem}.{EXTENSIONS[parsed.kind]}", File(original), save=False)
        if os.path.getsize(content):
            media_type = parsed.index.get("media_type")
            suffix = {"image/png": "-vision.png", "image/jpeg": "-vision.jpg"}.get(media_type, ".jsonl")
            with open(content, "rb") as normalized:
                attachment.content.save(f"{stem}{suffix}", File(normalized), save=False)
    with transaction.atomic():
        attachment.save()
        audit_record(
            kind=AuditEvent.Kind.ATTACHMENT_UPLOADED,
            actor=owner,
            conversation=conversation,
            data={
                "attachment_id": str(attachment.pk),
                "name": name,
                "kind": attachment.kind,
                "size": size,
                "sha256": sha256,
            },
        )
    return attachment
