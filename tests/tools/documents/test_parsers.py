"""The parsers, called in this process: what each format becomes (text for the model, meta, content file)."""

from __future__ import annotations

import json

import pytest

from tools.documents import detect
from tools.documents.content import ContentReader
from tools.documents.exceptions import Unreadable, UnsupportedFormat
from tools.documents.limits import DEFAULT_LIMITS, Limits
from tools.documents.parsing import parse_file

from . import samples


def read(tmp_path, name: str, data: bytes, limits: Limits = DEFAULT_LIMITS):
    source, content = tmp_path / "source", tmp_path / "content"
    source.write_bytes(data)
    parsed = parse_file(str(source), str(content), name, limits)
    return parsed, content


def units(content, parsed, part: int = 0) -> list:
    with open(content, "rb") as source:
        reader = ContentReader(source, parsed.index)
        return [[number, value] for number, value in reader.units(reader.parts[part])]


# --- detection -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (samples.report_pdf(), "pdf"),
        (b"junk before the header\n" + samples.report_pdf(), "pdf"),
        (samples.two_sheet_xlsx(), "xlsx"),
        (samples.png_bytes(), "png"),
        (samples.jpeg_bytes((16, 16)), "jpeg"),
        (b'  \n{"a": 1}', "json"),
        (b"\xef\xbb\xbf[1, 2]", "json"),
        (b"a;b\n1;2\n", "csv"),
        ("имя,город\n".encode("utf-16"), "csv"),
    ],
)
def test_the_kind_comes_from_the_bytes(tmp_path, data, kind):
    path = tmp_path / "file"
    path.write_bytes(data)

    assert detect.detect(str(path)) == kind


# --- PDF -------------------------------------------------------------------------------------------


def test_a_pdf_gives_text_per_page_and_tables_as_markdown(tmp_path):
    parsed, content = read(tmp_path, "report.pdf", samples.report_pdf())

    assert parsed.kind == "pdf"
    assert "=== Page 1 of 3 ===\nQuarterly report 2024" in parsed.text
    assert "| Risk | Owner | Level |\n|---|---|---|\n| Supplier delay | Procurement | High |" in parsed.text
    # The table's cells are shown once, as the table, not also as loose words.
    assert parsed.text.count("Currency swings") == 1
    pages = units(content, parsed)
    assert [number for number, _ in pages] == [1, 2, 3]
    assert pages[2][1] == "Conclusions\nMitigate the supplier delay before the next audit."


def test_a_pdf_without_a_text_layer_says_so(tmp_path):
    parsed, content = read(tmp_path, "scan.pdf", samples.scanned_pdf(pages=2))

    assert parsed.meta["text_layer"] is False
    assert parsed.text.startswith("[This PDF has no text layer: it is 2 pages of images only")
    assert "OCR" in parsed.text
    assert units(content, parsed)[0] == [1, "[No text layer on this page: it is an image.]"] or units(content, parsed)[
        0
    ] == (1, "[No text layer on this page: it is an image.]")


def test_an_encrypted_pdf_is_refused_clearly(tmp_path):
    with pytest.raises(Unreadable, match="encrypted: it needs a password"):
        read(tmp_path, "secret.pdf", samples.encrypted_pdf())


def test_only_the_first_pages_are_read_past_the_limit(tmp_path):
    pages = [samples.text_ops([(72, 770, f"Page number {n}")]) for n in range(1, 6)]

    parsed, content = read(tmp_path, "long.pdf", samples.pdf_with_pages(pages), Limits(max_pages=2))

    assert (parsed.meta["pages"], parsed.meta["pages_read"]) == (5, 2)
    assert "[Only the first 2 of 5 pages were read.]" in parsed.text
    assert len(units(content, parsed)) == 2


# --- XLSX ------------------------------------------------------------------------------------------


def test_every_sheet_is_a_table_with_its_header(tmp_path):
    parsed, content = read(tmp_path, "book.xlsx", samples.two_sheet_xlsx())

    assert '=== Sheet "Sales": 4 rows × 3 columns (A–C), header in row 1 ===' in parsed.text
    assert "| _row | Region | Product | Amount |" in parsed.text
    assert "| 3 | South | Coffee | 80.5 |" in parsed.text
    assert '=== Sheet "Staff": 2 rows × 2 columns (A–B), header in row 1 ===' in parsed.text
    assert [part["name"] for part in parsed.index["parts"]] == ["Sales", "Staff"]
    assert parsed.index["parts"][0]["columns"] == ["Region", "Product", "Amount"]
    assert units(content, parsed, 1) == [[2, ["Ivanova", "2021-03-01"]], [3, ["Petrov", "2022-11-15"]]]


def test_a_big_sheet_shows_its_first_rows_and_columns_and_its_true_size(tmp_path):
    import io

    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append([f"col{n}" for n in range(1, 31)])
    for row in range(2, 502):
        sheet.append([row * 100 + n for n in range(1, 31)])
    out = io.BytesIO()
    workbook.save(out)

    parsed, content = read(tmp_path, "wide.xlsx", out.getvalue(), Limits(preview_rows=5, preview_cols=4))

    assert "500 rows × 30 columns (A–AD)" in parsed.text
    assert "[Shown: the first 5 of 500 rows and the first 4 of 30 columns; the document tools read the rest.]" in (
        parsed.text
    )
    assert "| _row | col1 | col2 | col3 | col4 |" in parsed.text
    assert parsed.meta["sheets"][0]["rows"] == 500
    assert len(units(content, parsed)) == 500


def test_a_zip_bomb_is_refused_from_the_declared_sizes(tmp_path):
    with pytest.raises(Unreadable, match="unpack"):
        read(
            tmp_path, "bomb.xlsx", samples.zip_bomb_xlsx(unpacked=4 * 1024 * 1024), Limits(zip_uncompressed=1024 * 1024)
        )


# --- CSV -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "encoding", "delimiter"),
    [
        (samples.csv_bytes(samples.CYRILLIC_ROWS, bom=True), "utf-8-sig", ","),
        (samples.csv_bytes(samples.CYRILLIC_ROWS, encoding="cp1251", delimiter=";"), "cp1251", ";"),
        (samples.csv_bytes(samples.CYRILLIC_ROWS, delimiter="\t"), "utf-8", "\t"),
        (samples.csv_bytes(samples.CYRILLIC_ROWS, encoding="utf-16", delimiter=";"), "utf-16", ";"),
    ],
    ids=["utf-8 with BOM", "cp1251 with semicolons", "tabs", "utf-16"],
)
def test_the_encoding_and_delimiter_are_detected(tmp_path, data, encoding, delimiter):
    parsed, content = read(tmp_path, "t.csv", data)

    assert (parsed.meta["encoding"], parsed.meta["delimiter"]) == (encoding, delimiter)
    assert parsed.index["parts"][0]["columns"] == ["Город", "Товар", "Сумма"]
    assert units(content, parsed)[0] == [2, ["Москва", "Чай", "1 200,50"]]


def test_nul_bytes_are_dropped_and_counted(tmp_path):
    parsed, content = read(tmp_path, "t.csv", b"name,city\nAn\x00na,Oslo\nBo,Ro\x00me\n")

    assert parsed.meta["nul_bytes_dropped"] == 2
    assert units(content, parsed) == [[2, ["Anna", "Oslo"]], [3, ["Bo", "Rome"]]]


def test_quoted_fields_may_hold_delimiters_and_newlines(tmp_path):
    parsed, content = read(tmp_path, "t.csv", b'name;note\n"Smith; J.";"line one\nline two"\nLee;ok\n')

    assert units(content, parsed) == [[2, ["Smith; J.", "line one\nline two"]], [3, ["Lee", "ok"]]]


def test_one_column_is_a_table_only_when_the_name_says_csv(tmp_path):
    parsed, _ = read(tmp_path, "list.csv", b"name\nAnna\nBo\n")
    assert parsed.meta["columns"] == 1

    with pytest.raises(UnsupportedFormat, match="plain text"):
        read(tmp_path, "notes.txt", b"name\nAnna\nBo\n")


# --- JSON ------------------------------------------------------------------------------------------


def test_json_is_pretty_printed_line_by_line(tmp_path):
    parsed, content = read(tmp_path, "a.json", samples.json_bytes())

    assert parsed.meta["top"] == "an object with 2 keys"
    assert parsed.meta["depth"] == 3
    assert '  "project": "Atlas",' in parsed.text
    lines = units(content, parsed)
    assert lines[0] == [1, "{"]
    assert json.loads("\n".join(text for _, text in lines)) == json.loads(samples.json_bytes())


def test_json_nesting_is_bounded(tmp_path):
    with pytest.raises(Unreadable, match="nests deeper than 64"):
        read(tmp_path, "deep.json", samples.deep_json(65))
    parsed, _ = read(tmp_path, "ok.json", samples.deep_json(64))
    assert parsed.meta["depth"] == 64


# --- images ----------------------------------------------------------------------------------------


def test_an_image_is_described_and_a_small_copy_is_made_for_vision(tmp_path):
    from PIL import Image

    parsed, content = read(tmp_path, "photo.jpg", samples.jpeg_bytes((2000, 1000)), Limits(vision_side=500))

    assert parsed.text == "[Image: JPEG image, 2,000 × 1,000 pixels, colour mode RGB.]"
    assert parsed.index == {"media_type": "image/jpeg"}
    with Image.open(content) as copy:
        assert (copy.format, copy.size) == ("JPEG", (500, 250))


def test_a_transparent_png_keeps_its_transparency_in_the_copy(tmp_path):
    parsed, _ = read(tmp_path, "logo.png", samples.png_bytes(mode="RGBA"))

    assert parsed.meta["transparency"] is True
    assert parsed.index == {"media_type": "image/png"}


def test_the_pixel_limit_is_checked_before_decoding(tmp_path):
    with pytest.raises(Unreadable, match="decompression bomb"):
        read(tmp_path, "big.png", samples.png_bytes((200, 200)), Limits(max_pixels=10_000))


@pytest.mark.parametrize(
    ("mode", "format_"), [("1", "PNG"), ("L", "PNG"), ("LA", "PNG"), ("P", "PNG"), ("I;16", "PNG"), ("CMYK", "JPEG")]
)
def test_every_colour_mode_is_read(tmp_path, mode, format_):
    import io

    from PIL import Image

    out = io.BytesIO()
    extra = {"transparency": 0} if mode == "P" else {}
    Image.new(mode, (40, 30)).save(out, format=format_, **extra)

    parsed, _ = read(tmp_path, f"image.{format_.lower()}", out.getvalue())

    assert (parsed.meta["mode"], parsed.meta["width"], parsed.meta["height"]) == (mode, 40, 30)
