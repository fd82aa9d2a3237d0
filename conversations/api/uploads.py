"""Uploads stopped past MAX_UPLOAD_BYTES: by the declared length before any of the body is parsed, and by
counting while it streams (a body may declare no length, or a false one)."""

from __future__ import annotations

import re

from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest, QueryDict
from django.utils.datastructures import MultiValueDict

from tools.documents.exceptions import FileTooLarge
from tools.documents.limits import MAX_UPLOAD_BYTES, MiB

# Room for the multipart boundaries and part headers around a file of the largest size accepted.
MULTIPART_SLACK = 64 * 1024


def too_large() -> FileTooLarge:
    return FileTooLarge(f"The file is larger than {MAX_UPLOAD_BYTES // MiB} MB, the most accepted.")


def declared_length(request: HttpRequest) -> int | None:
    try:
        return int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None


class UploadLimitHandler(FileUploadHandler):
    """First of the request's upload handlers: it refuses the body or passes each chunk on, counting."""

    def __init__(self, request: HttpRequest | None = None, limit: int = MAX_UPLOAD_BYTES):
        super().__init__(request)
        self.limit = limit
        self.exceeded = False

    def body_too_large(self, length: int | None) -> bool:
        return length is not None and length > self.limit + MULTIPART_SLACK

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        if self.body_too_large(content_length):
            self.exceeded = True
            # "Handled", with nothing: the other handlers never see the body and none of it is read.
            return QueryDict(encoding=encoding), MultiValueDict()
        return None

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > self.limit:
            self.exceeded = True
            # Stops parsing at once and leaves the rest of the body unread.
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def limit_uploads(request: HttpRequest) -> UploadLimitHandler:
    """Put the limit in front of Django's handlers; call before anything reads the body."""
    handler = UploadLimitHandler(request)
    request.upload_handlers.insert(0, handler)
    return handler


ATTACHMENTS_PATH = re.compile(r"^/api/assistant/conversations/[^/]+/attachments/?$")
