"""How much of a file is accepted, read and shown. The numbers docs/tools.md quotes."""

from __future__ import annotations

from dataclasses import dataclass, field

MiB = 1024 * 1024

MAX_UPLOAD_BYTES = 10 * MiB
# The kinds, in the order they are listed to people (the values of Attachment.Kind).
SUPPORTED = ("pdf", "xlsx", "csv", "json", "png", "jpeg")
SUPPORTED_LABEL = "PDF, XLSX, CSV, JSON, PNG, JPEG"


@dataclass(frozen=True)
class Limits:
    # The text kept with an attachment: what the model reads first, before it reaches for the tools.
    text_chars: int = 1_000_000
    # Rows and columns of each sheet shown in that text; every row stays reachable through the tools.
    preview_rows: int = 50
    preview_cols: int = 20
    cell_chars: int = 200
    # Columns kept per row in the content file, and pages read from a PDF.
    max_cols: int = 1_000
    max_pages: int = 2_000
    # XLSX (a ZIP archive) is checked against these before anything is decompressed.
    zip_members: int = 10_000
    zip_uncompressed: int = 256 * MiB
    zip_ratio: int = 200
    json_depth: int = 64
    # Pillow's decompression-bomb guard, and the longest side of the copy a vision model is sent.
    max_pixels: int = 50_000_000
    vision_side: int = 1568
    # The content file (pages, rows, lines) a parser may write.
    content_bytes: int = 512 * MiB
    # Seconds of processor time reading one file may take, by format. A PDF past its budget keeps the pages
    # read so far; one page may take at most `pdf_page_seconds` (a page of nested drawings is skipped).
    cpu_seconds: dict[str, float] = field(
        default_factory=lambda: {"pdf": 20.0, "xlsx": 90.0, "csv": 20.0, "json": 10.0, "png": 10.0, "jpeg": 10.0}
    )
    pdf_page_seconds: float = 2.0


DEFAULT_LIMITS = Limits()
