"""PDF with pdfplumber: text per page, tables as Markdown, and a plain statement when there is no text layer."""

from __future__ import annotations

import logging
import time

import pdfplumber
from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
from pdfplumber.utils.exceptions import PdfminerException

from . import tables
from .content import ContentWriter
from .exceptions import Unreadable
from .parsed import Parsed, Source, TextBuffer
from .sandbox import OutOfTime, processor_time

NO_TEXT_LAYER = (
    "[This PDF has no text layer: it is {pages} of images only (a scan or a photo?). "
    "Its text cannot be read without OCR, which is not done here.]"
)


def _opened(path: str) -> pdfplumber.PDF:
    try:
        return pdfplumber.open(path)
    except PdfminerException as exc:
        cause = exc.args[0] if exc.args else exc
        if isinstance(cause, PDFPasswordIncorrect):
            raise Unreadable(
                "The PDF is encrypted: it needs a password to open. Remove the password and upload it again."
            ) from None
        if isinstance(cause, PDFEncryptionError):
            raise Unreadable(f"The PDF is encrypted in a way that cannot be opened here ({cause}).") from None
        raise Unreadable(f"The file starts like a PDF but its structure is broken ({_reason(cause)}).") from None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"


def _page_text(page) -> tuple[str, int]:
    """The page's text, then its tables as Markdown (their cells left out of the text); and the table count."""
    found = [table for table in page.find_tables() if any(any(cell for cell in row) for row in table.extract())]
    outside = page
    for table in found:
        outside = outside.outside_bbox(table.bbox)
    text = (outside.extract_text() or "").strip()
    blocks = [text] if text else []
    for number, table in enumerate(found, start=1):
        rows = table.extract()
        columns = tables.column_names(rows[0], max(len(row) for row in rows))
        blocks.append(f"Table {number} on page {page.page_number}:\n" + tables.markdown(columns, rows[1:]))
    return "\n\n".join(blocks), len(found)


def parse(source: Source) -> Parsed:
    # pdfminer narrates every oddity of a damaged file at WARNING; the outcome is what matters here.
    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    limits = source.limits
    budget = limits.cpu_seconds["pdf"]
    deadline = time.process_time() + budget
    writer = ContentWriter(source.content)
    writer.start_part("pages")
    text = TextBuffer(limits.text_chars)
    with _opened(source.path) as pdf:
        try:
            with processor_time(budget):
                total = len(pdf.pages)
        except OutOfTime:
            raise Unreadable(f"The PDF's list of pages took more than {budget:g} seconds to read.") from None
        except RecursionError:
            raise Unreadable("The PDF's page tree refers to itself (circular references).") from None
        except Exception as exc:
            raise Unreadable(f"The PDF's list of pages cannot be read ({_reason(exc)}).") from None
        if total == 0:
            raise Unreadable("The PDF has no pages (or its page tree is broken).")
        read = with_text = tables_found = failed = 0
        for page in pdf.pages[: limits.max_pages]:
            left = deadline - time.process_time()
            if left <= 0:
                break
            try:
                with processor_time(min(limits.pdf_page_seconds, left)):
                    body, count = _page_text(page)
            except OutOfTime:
                if left <= limits.pdf_page_seconds:  # the whole file's time ran out, not the page's own
                    break
                reason = f"it took more than {limits.pdf_page_seconds:g} seconds"
                body, count, failed = f"[This page could not be read: {reason}.]", 0, failed + 1
            except RecursionError:
                raise Unreadable(f"Page {page.page_number} refers to itself (circular references).") from None
            except Exception as exc:
                reason = _reason(exc)
                body, count, failed = f"[This page could not be read: {reason}]", 0, failed + 1
            finally:
                page.close()
            read += 1
            if body and not body.startswith("[This page could not"):
                with_text += 1
            elif not body:
                body = "[No text layer on this page: it is an image.]"
            tables_found += count
            writer.add(page.page_number, body)
            text.add(f"=== Page {page.page_number} of {total} ===\n{body}\n\n")
        if read == 0:
            raise Unreadable(f"Reading the PDF took more than {budget:g} seconds before its first page was read.")
        if failed == read:
            raise Unreadable(f"The file starts like a PDF but none of its pages can be read ({reason}).")
    meta = {"pages": total, "pages_read": read, "pages_with_text": with_text, "tables": tables_found}
    if with_text == 0:
        meta["text_layer"] = False
        pages = "one page" if total == 1 else f"{total:,} pages"
        return Parsed(kind="pdf", text=NO_TEXT_LAYER.format(pages=pages), meta=meta, index=writer.index())
    meta["text_layer"] = True
    if read < min(total, limits.max_pages):
        text.add(
            f"[Only the first {read:,} of {total:,} pages were read: reading more would take longer than the "
            f"{budget:g} seconds allowed.]"
        )
    elif read < total:
        text.add(f"[Only the first {read:,} of {total:,} pages were read.]")
    return Parsed(kind="pdf", text=text.text(), meta=meta, index=writer.index())
