"""The files the front-door measures upload: a CSV, an XLSX and a PDF of about `size` bytes, made at run time.

Each is written straight to disk, row by row or page by page, until it is as large as asked (to within a
row, a page, or the XLSX's compressor's buffer), and takes a second or two. None of the product's code
is used: the XLSX parts and the PDF objects are written here by hand. (openpyxl's write-only mode would
take about 17 s for the quarter of a million rows; the server reads the result with openpyxl all the same.)
"""

from __future__ import annotations

import random
import zipfile
from pathlib import Path

MiB = 1024 * 1024
# The server accepts files of at most 10 MiB (10,485,760 bytes); these are just under.
DEFAULT_SIZE = int(9.75 * MiB)
CITIES = ("Berlin", "Paris", "Madrid", "Rome", "Vienna", "Prague", "Warsaw", "Lisbon", "Oslo", "Dublin", "Sofia")
WORDS = (
    *("revenue", "grew", "in", "the", "third", "quarter", "while", "costs", "held", "steady", "across"),
    *("every", "region", "and", "product", "line", "supplier", "delay", "was", "mitigated", "before"),
    *("audit", "currency", "swings", "were", "hedged", "time"),
)


def _random(seed: int) -> random.Random:
    return random.Random(seed)  # noqa: S311 - filler made the same at every run, no secret


def make_csv(path: Path, size: int = DEFAULT_SIZE, seed: int = 1) -> dict:
    """`id,code,city,amount` rows until the next would pass `size` bytes."""
    rnd = _random(seed)
    rows, written = 0, 0
    with open(path, "wb") as out:
        header = b"id,code,city,amount\n"
        out.write(header)
        written = len(header)
        block: list[bytes] = []
        while True:
            line = b"%d,C%05d,%s,%d.%02d\n" % (
                rows + 1,
                rnd.randrange(100_000),
                CITIES[rnd.randrange(len(CITIES))].encode(),
                rnd.randrange(100_000),
                rnd.randrange(100),
            )
            if written + len(line) > size:
                break
            block.append(line)
            written += len(line)
            rows += 1
            if len(block) >= 10_000:
                out.write(b"".join(block))
                block.clear()
        out.write(b"".join(block))
    return {"rows": rows, "columns": 4}


XLSX_PARTS = {
    "[Content_Types].xml": (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/xl/workbook.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
        '<Override PartName="/xl/worksheets/sheet1.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
        "</Types>"
    ),
    "_rels/.rels": (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" '
        'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
        'Target="xl/workbook.xml"/></Relationships>'
    ),
    "xl/workbook.xml": (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
        'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
        '<sheets><sheet name="Sales" sheetId="1" r:id="rId1"/></sheets></workbook>'
    ),
    "xl/_rels/workbook.xml.rels": (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" '
        'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" '
        'Target="worksheets/sheet1.xml"/></Relationships>'
    ),
}
XLSX_HEADER = ("id", "code", "city", "amount", "quantity")
# What the end of the archive adds after the sheet: the rest of the compressor's buffer and the directory.
XLSX_TAIL_ROOM = 96 * 1024


def _inline(ref: str, text: str) -> str:
    return f'<c r="{ref}" t="inlineStr"><is><t>{text}</t></is></c>'


def make_xlsx(path: Path, size: int = DEFAULT_SIZE, seed: int = 1) -> dict:
    """One sheet of five columns (numbers and inline strings), rows until the archive is about `size` bytes."""
    rnd = _random(seed)
    rows = 0
    with open(path, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for name, text in XLSX_PARTS.items():
            archive.writestr(name, text)
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            head = "".join(_inline(f"{'ABCDE'[index]}1", name) for index, name in enumerate(XLSX_HEADER))
            sheet.write(
                (
                    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
                    '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
                    f'<sheetData><row r="1">{head}</row>'
                ).encode()
            )
            while raw.tell() < size - XLSX_TAIL_ROOM:
                block = []
                for _ in range(2_000):
                    rows += 1
                    r = rows + 1
                    block.append(
                        f'<row r="{r}"><c r="A{r}"><v>{rows}</v></c>'
                        + _inline(f"B{r}", f"C{rnd.randrange(100_000):05d}")
                        + _inline(f"C{r}", CITIES[rnd.randrange(len(CITIES))])
                        + f'<c r="D{r}"><v>{rnd.randrange(100, 10_000_000) / 100}</v></c>'
                        + f'<c r="E{r}"><v>{rnd.randrange(1000)}</v></c></row>'
                    )
                sheet.write("".join(block).encode())
            sheet.write(b"</sheetData></worksheet>")
    return {"rows": rows, "columns": len(XLSX_HEADER)}


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _page_content(number: int, lines: int, rnd: random.Random) -> bytes:
    ops = []
    for line in range(lines):
        words = " ".join(rnd.choice(WORDS) for _ in range(9))
        text = _escape(f"Page {number} line {line + 1}: {words}.")
        ops.append(f"BT /F1 9 Tf 40 {800 - 12 * line} Td ({text}) Tj ET\n")
    return "".join(ops).encode("latin-1")


def make_pdf(path: Path, size: int = DEFAULT_SIZE, lines: int = 60, seed: int = 1) -> dict:
    """A4 pages of `lines` lines of text each (Helvetica, nothing embedded), pages until the file is about `size`.

    Objects: 1 the catalog, 2 the page tree (written last, once the pages are known), 3 the font, then a
    page and its content stream for each page; a cross-reference table and the trailer close it.
    """
    rnd = _random(seed)
    offsets: dict[int, int] = {}
    kids: list[bytes] = []
    with open(path, "wb") as out:

        def write_object(number: int, body: bytes) -> None:
            offsets[number] = out.tell()
            out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")

        out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
        write_object(1, b"<< /Type /Catalog /Pages 2 0 R >>")
        write_object(3, b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
        while True:
            number = len(kids) + 1
            page, stream = 4 + 2 * len(kids), 5 + 2 * len(kids)
            content = _page_content(number, lines, rnd)
            body_page = (
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> "
                b"/Contents %d 0 R >>" % stream
            )
            body_stream = b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream"
            grown = len(body_page) + len(body_stream) + 2 * 30
            # What the end adds: the page tree's entries, 20 bytes of cross-reference per object, the trailer.
            tail = sum(len(kid) + 1 for kid in kids) + 12 + 20 * (stream + 1) + 400
            if kids and out.tell() + grown + tail > size:
                break
            write_object(page, body_page)
            write_object(stream, body_stream)
            kids.append(b"%d 0 R" % page)
        write_object(2, b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids)))
        xref = out.tell()
        count = max(offsets) + 1
        out.write(b"xref\n0 %d\n0000000000 65535 f \n" % count)
        for number in range(1, count):
            out.write(b"%010d 00000 n \n" % offsets[number])
        out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (count, xref))
    return {"pages": len(kids), "lines_per_page": lines}


MAKERS = {
    "csv": (make_csv, "text/csv"),
    "xlsx": (make_xlsx, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    "pdf": (make_pdf, "application/pdf"),
}
