"""What a file is, from its bytes (signature, then structure), never from its name.

A supported signature decides the kind; whether the rest of the file backs it up is the parser's
question (a truncated JPEG is a JPEG that fails to read: 422, not 415). Text without a signature is
JSON when it starts like JSON, otherwise a table when a delimiter splits it into columns.
"""

from __future__ import annotations

import codecs
import zipfile
from pathlib import PurePath

import filetype

from .exceptions import Unreadable, UnsupportedFormat
from .limits import SUPPORTED, SUPPORTED_LABEL

HEAD_BYTES = 8192
# Where Acrobat still finds the header: junk before it is common in PDFs produced by broken tools.
PDF_HEADER_WINDOW = 1024
TEXT_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)

# How a few common unsupported kinds are named to people; others by filetype's extension.
NAMES = {
    "exe": "a Windows program (EXE)",
    "elf": "a Linux program (ELF)",
    "zip": "a ZIP archive",
    "docx": "a Word document (DOCX)",
    "pptx": "a PowerPoint presentation (PPTX)",
    "doc": "a Word 97–2003 document (DOC)",
    "xls": "an Excel 97–2003 workbook (XLS) or a password-protected Office file",
    "ppt": "a PowerPoint 97–2003 presentation (PPT)",
    "gif": "a GIF image",
    "webp": "a WebP image",
}


# A name that claims one of our formats: content that is something else is a file lying about itself.
CLAIMED = {
    ".pdf": "a PDF",
    ".xlsx": "an XLSX workbook",
    ".csv": "a CSV table",
    ".json": "a JSON document",
    ".png": "a PNG image",
    ".jpg": "a JPEG image",
    ".jpeg": "a JPEG image",
}


def detect(path: str, name: str = "") -> str:
    """The kind of the file at `path`: UnsupportedFormat (415) when it is none of ours, Unreadable (422) when
    its `name` claims one of ours and its content is something else (docs/http-api.md)."""
    try:
        return _detect(path)
    except UnsupportedFormat as error:
        claimed = CLAIMED.get(PurePath(name).suffix.lower())
        if claimed is None:
            raise
        raise Unreadable(
            f"{name} claims to be {claimed} but is {error.what}. Supported: {SUPPORTED_LABEL}.",
            supported=list(SUPPORTED),
        ) from None


def _detect(path: str) -> str:
    with open(path, "rb") as source:
        head = source.read(HEAD_BYTES)
    if not head:
        raise Unreadable("The file is empty.")
    if head.startswith(b"PK\x03\x04"):
        return _zip_kind(path)
    if b"%PDF-" in head[:PDF_HEADER_WINDOW]:
        return "pdf"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    guess = filetype.guess(head)
    if guess is not None:
        raise UnsupportedFormat.because(NAMES.get(guess.extension, f"a {guess.extension.upper()} file"))
    if not looks_like_text(head):
        raise UnsupportedFormat.because("binary data of an unknown kind")
    return "json" if first_character(head) in {"{", "["} else "csv"


def looks_like_text(head: bytes) -> bool:
    """Text in some encoding: a BOM, or few NUL bytes and control characters (a stray NUL is tolerated)."""
    if head.startswith(TEXT_BOMS):
        return True
    controls = sum(1 for byte in head if byte < 32 and byte not in b"\t\n\r\f\x00")
    return head.count(0) <= max(len(head) // 100, 16) and controls <= len(head) // 50


def first_character(head: bytes) -> str:
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if head.startswith(bom):
            text = head[len(bom) :].decode(encoding, "ignore")
            break
    else:
        text = head.decode("latin-1")
    stripped = text.replace("\x00", "").lstrip()
    return stripped[:1]


def _zip_kind(path: str) -> str:
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist()[:100_000])
            if "[Content_Types].xml" in names and "xl/workbook.xml" in names:
                return "xlsx"
    except (zipfile.BadZipFile, OSError, ValueError):
        raise Unreadable("The file starts like a ZIP archive (as an XLSX does) but its structure is broken.") from None
    if "word/document.xml" in names:
        what = NAMES["docx"]
    elif "ppt/presentation.xml" in names:
        what = NAMES["pptx"]
    elif "mimetype" in names:
        what = "an OpenDocument file (ODS, ODT…)"
    else:
        what = NAMES["zip"]
    raise UnsupportedFormat.because(what)
