"""Files for the tests, made here rather than shipped: good ones of every format and hostile ones.

The PDFs are written by a tiny PDF writer (Helvetica, one of the 14 fonts every reader has, so nothing is
embedded); tables are drawn with ruling lines, which is what pdfplumber's table finder looks for.
"""

from __future__ import annotations

import csv
import io
import json
import random
import zipfile
from collections.abc import Sequence

import openpyxl
from PIL import Image, ImageDraw

# --- PDF ------------------------------------------------------------------------------------------


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def text_ops(lines: Sequence[tuple[float, float, str]], size: int = 11) -> bytes:
    return b"".join(f"BT /F1 {size} Tf {x} {y} Td ({_escape(text)}) Tj ET\n".encode("latin-1") for x, y, text in lines)


def table_ops(
    x: float, top: float, widths: Sequence[float], rows: Sequence[Sequence[str]], height: float = 20
) -> bytes:
    """A ruled table: every cell boxed, its text inside."""
    right = x + sum(widths)
    bottom = top - height * len(rows)
    ops = [b"0.5 w\n"]
    for index in range(len(rows) + 1):
        y = top - height * index
        ops.append(f"{x} {y} m {right} {y} l S\n".encode())
    edge = x
    for width in [0, *widths]:
        edge += width
        ops.append(f"{edge} {top} m {edge} {bottom} l S\n".encode())
    cells = []
    for r, row in enumerate(rows):
        left = x
        for width, text in zip(widths, row, strict=True):
            cells.append((left + 4, top - height * (r + 1) + 6, text))
            left += width
    return b"".join(ops) + text_ops(cells, size=10)


def build_pdf(objects: dict[int, bytes], *, root: int = 1, trailer_extra: bytes = b"") -> bytes:
    """Objects `{number: body}` written with a correct cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = out.tell()
        out.write(b"%d 0 obj\n" % number + objects[number] + b"\nendobj\n")
    xref = out.tell()
    size = max(objects) + 1
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % size)
    for number in range(1, size):
        if number in offsets:
            out.write(b"%010d 00000 n \n" % offsets[number])
        else:
            out.write(b"0000000000 65535 f \n")
    out.write(b"trailer\n<< /Size %d /Root %d 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (size, root, trailer_extra, xref))
    return out.getvalue()


def _stream(data: bytes) -> bytes:
    return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"


def pdf_with_pages(
    pages: Sequence[bytes], *, trailer_extra: bytes = b"", extra: dict[int, bytes] | None = None
) -> bytes:
    """One page per content stream, A4."""
    objects = {1: b"<< /Type /Catalog /Pages 2 0 R >>", 3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"}
    kids = []
    for index, content in enumerate(pages):
        page, stream = 4 + 2 * index, 5 + 2 * index
        kids.append(b"%d 0 R" % page)
        objects[page] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> "
            b"/Contents %d 0 R >>" % stream
        )
        objects[stream] = _stream(content)
    objects[2] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(pages))
    objects.update(extra or {})
    return build_pdf(objects, trailer_extra=trailer_extra)


RISKS = [
    ("Risk", "Owner", "Level"),
    ("Supplier delay", "Procurement", "High"),
    ("Currency swings", "Finance", "Medium"),
    ("Key staff leaving", "HR", "Low"),
]


def report_pdf() -> bytes:
    """Three pages: an introduction, a table of risks, and conclusions."""
    first = text_ops(
        [(72, 770, "Quarterly report 2024"), (72, 740, "Revenue grew by 12 percent in the third quarter.")]
    )
    second = text_ops([(72, 770, "Risk register"), (72, 750, "The main risks are listed below.")]) + table_ops(
        72, 720, [180, 140, 80], RISKS
    )
    third = text_ops([(72, 770, "Conclusions"), (72, 740, "Mitigate the supplier delay before the next audit.")])
    return pdf_with_pages([first, second, third])


def scanned_pdf(pages: int = 2) -> bytes:
    """Pages that are pictures of text, with no text layer: what a scanner makes."""
    images = []
    for number in range(pages):
        image = Image.new("L", (420, 595), 255)
        draw = ImageDraw.Draw(image)
        draw.text((40, 40), f"Scanned page {number + 1}", fill=0)
        draw.rectangle((40, 80, 380, 300), outline=0)
        images.append(image)
    out = io.BytesIO()
    images[0].save(out, format="PDF", save_all=True, append_images=images[1:], resolution=72)
    return out.getvalue()


def encrypted_pdf() -> bytes:
    """A PDF whose Standard security handler wants a password that is not the empty one."""
    encrypt = b"<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P -44 >>" % (b"ab" * 32, b"cd" * 32)
    content = text_ops([(72, 770, "Secret")])
    return pdf_with_pages(
        [content],
        trailer_extra=b"/Encrypt 90 0 R /ID [<0123456789abcdef0123456789abcdef><0123456789abcdef0123456789abcdef>] ",
        extra={90: encrypt},
    )


def circular_pdf() -> bytes:
    """A page tree that is its own child, and a page whose contents refer to themselves."""
    objects = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",
        3: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R >>",
        4: b"4 0 R",
    }
    return build_pdf(objects)


# --- spreadsheets and text tables -----------------------------------------------------------------


def two_sheet_xlsx() -> bytes:
    workbook = openpyxl.Workbook()
    sales = workbook.active
    sales.title = "Sales"
    sales.append(["Region", "Product", "Amount"])
    for region, product, amount in [
        ("North", "Tea", 120),
        ("South", "Coffee", 80.5),
        ("North", "Coffee", 200),
        ("East", "Tea", 50),
    ]:
        sales.append([region, product, amount])
    staff = workbook.create_sheet("Staff")
    staff.append(["Name", "Started"])
    staff.append(["Ivanova", "2021-03-01"])
    staff.append(["Petrov", "2022-11-15"])
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def _replace_in_zip(data: bytes, replacements: dict[str, bytes]) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            target.writestr(item.filename, replacements.get(item.filename, source.read(item.filename)))
    return out.getvalue()


def plain_zip() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("notes.txt", "Not a workbook.")
    return out.getvalue()


def billion_laughs_xlsx() -> bytes:
    entities = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    sheet = (
        '<?xml version="1.0"?>\n<!DOCTYPE worksheet [' + "".join(entities) + "]>\n"
        '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        '<sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>&lol9;</t></is></c></row></sheetData></worksheet>'
    )
    return _replace_in_zip(two_sheet_xlsx(), {"xl/worksheets/sheet1.xml": sheet.encode()})


def zip_bomb_xlsx(unpacked: int = 300 * 1024 * 1024) -> bytes:
    """A workbook whose first sheet unpacks to `unpacked` bytes of blanks: a few hundred KB stored."""
    data = two_sheet_xlsx()
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as target:
        for item in source.infolist():
            if item.filename != "xl/worksheets/sheet1.xml":
                target.writestr(item.filename, source.read(item.filename))
        with target.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            chunk = b" " * (1 << 20)
            for _ in range(unpacked // len(chunk)):
                sheet.write(chunk)
    return out.getvalue()


def csv_bytes(
    rows: Sequence[Sequence[object]], *, encoding: str = "utf-8", delimiter: str = ",", bom: bool = False
) -> bytes:
    out = io.StringIO(newline="")
    csv.writer(out, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    data = out.getvalue().encode(encoding)
    return (b"\xef\xbb\xbf" + data) if bom else data


CYRILLIC_ROWS = [
    ("Город", "Товар", "Сумма"),
    ("Москва", "Чай", "1 200,50"),
    ("Казань", "Кофе", "800,25"),
    ("Москва", "Кофе", "300"),
]


def large_csv(rows: int = 6_000) -> bytes:
    """`rows` data rows after the header; the data row in spreadsheet row N has id N - 1 and code CODE-N."""
    lines = [("id", "code", "city", "amount")]
    lines += [(n - 1, f"CODE-{n}", ("Oslo", "Rome", "Lima")[n % 3], n * 10) for n in range(2, rows + 2)]
    return csv_bytes(lines)


def json_bytes() -> bytes:
    return json.dumps(
        {"project": "Atlas", "risks": [{"name": "Supplier delay", "level": "high"}, {"name": "Scope creep"}]},
        ensure_ascii=False,
    ).encode()


def deep_json(depth: int = 200) -> bytes:
    return b"[" * depth + b"]" * depth


# --- images and the rest ----------------------------------------------------------------------------


def png_bytes(size: tuple[int, int] = (64, 48), mode: str = "RGB") -> bytes:
    image = Image.new(mode, size, "white" if mode != "1" else 1)
    ImageDraw.Draw(image).rectangle((4, 4, size[0] // 2, size[1] // 2), fill="red" if mode == "RGB" else 0)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def jpeg_bytes(size: tuple[int, int] = (640, 480)) -> bytes:
    rng = random.Random(7)  # noqa: S311 - noise that JPEG cannot compress away, not a secret
    image = Image.frombytes("RGB", size, rng.randbytes(size[0] * size[1] * 3))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=90)
    return out.getvalue()


def huge_png() -> bytes:
    """20,000 × 20,000 pixels in a few kilobytes: a decompression bomb."""
    out = io.BytesIO()
    Image.new("1", (20_000, 20_000), 0).save(out, format="PNG")
    return out.getvalue()


def truncated_jpeg() -> bytes:
    data = jpeg_bytes((320, 240))
    return data[: len(data) // 2]


def windows_exe() -> bytes:
    """The start of a PE file: an MS-DOS header with its stub, then a PE signature."""
    header = bytearray(b"MZ" + b"\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00" + bytes(46))
    header[60:64] = (128).to_bytes(4, "little")
    stub = b"This program cannot be run in DOS mode.\r\r\n$" + bytes(128 - 64 - 44 + 20)
    return bytes(header) + stub + b"PE\x00\x00" + bytes(512)


def nested_xobjects_pdf(depth: int = 20, fan_out: int = 4) -> bytes:
    """A few KB of form XObjects, each drawing the next one `fan_out` times: fan_out**depth drawings to interpret."""
    resources = b"/Font << /F1 3 0 R >>"
    extra = {}
    for level in range(depth):
        number, inner = 10 + level, 11 + level
        if level + 1 < depth:
            content = b" ".join(b"q /X Do Q" for _ in range(fan_out))
            form_resources = b"<< %s /XObject << /X %d 0 R >> >>" % (resources, inner)
        else:
            content, form_resources = b"BT /F1 8 Tf 10 10 Td (deep) Tj ET", b"<< %s >>" % resources
        extra[number] = (
            b"<< /Type /XObject /Subtype /Form /BBox [0 0 595 842] /Resources %s /Length %d >>\nstream\n"
            % (form_resources, len(content))
            + content
            + b"\nendstream"
        )
    pdf = pdf_with_pages([b"/X Do"], extra=extra)
    return pdf.replace(
        b"/Resources << /Font << /F1 3 0 R >> >>", b"/Resources << %s /XObject << /X 10 0 R >> >>" % resources
    )
