"""The document tools on the global registry: read a page or rows, search with page/row references, query tables.
Only the files of the current conversation that belong to the user are reachable."""

from __future__ import annotations

import pytest

from conversations import services
from conversations.selectors import ConversationFiles
from tools.documents.tools import DocumentToolError
from tools.registry import ToolContext, registry

from . import samples
from .conftest import attach

pytestmark = pytest.mark.django_db

DOCUMENT_TOOLS = {"read_document", "search_document", "query_table"}


def call(name: str, ctx: ToolContext, **args):
    tool = registry.get(name)
    return tool.func(tool.validate(args), ctx)


@pytest.fixture
def ctx(alice, conversation) -> ToolContext:
    return ToolContext(
        user=alice, conversation_id=str(conversation.pk), files=ConversationFiles(conversation.pk, alice)
    )


def test_the_tools_are_registered_for_everyone(alice):
    permitted = {tool.name for tool in registry.permitted(alice)}

    assert permitted >= DOCUMENT_TOOLS
    for name in DOCUMENT_TOOLS:
        tool = registry.get(name)
        assert not tool.requires_confirmation
        assert tool.permission is None
        assert tool.schema()["parameters"]["required"][0] == "attachment_id"


def test_the_local_models_grammar_takes_their_schemas(caplog):
    from agentchat.agent.providers.local import arguments_grammar

    for name in sorted(DOCUMENT_TOOLS):
        assert arguments_grammar(registry.get(name).schema()) is not None
    assert "has no grammar" not in caplog.text


# --- read_document ---------------------------------------------------------------------------------


def test_read_a_page_of_a_pdf(ctx, conversation):
    report = attach(conversation, "report.pdf", samples.report_pdf())

    answer = call("read_document", ctx, attachment_id=str(report.pk), start=2, end=2)

    assert answer.startswith("report.pdf, pages 2–2 of 3:\n=== Page 2 of 3 ===\nRisk register")
    assert "| Supplier delay | Procurement | High |" in answer
    assert "Conclusions" not in answer


def test_a_file_can_be_named_instead_of_its_id(ctx, conversation):
    attach(conversation, "report.pdf", samples.report_pdf())

    assert "=== Page 3 of 3 ===" in call("read_document", ctx, attachment_id="REPORT.pdf", start=3)


def test_read_rows_of_a_sheet(ctx, conversation):
    book = attach(conversation, "book.xlsx", samples.two_sheet_xlsx())

    answer = call("read_document", ctx, attachment_id=str(book.pk), sheet="staff", start=3)

    assert answer == (
        'sheet "Staff" of book.xlsx: rows 3–3 of 2 data rows (header in row 1).\n'
        "| _row | Name | Started |\n|---|---|---|\n| 3 | Petrov | 2022-11-15 |"
    )


def test_row_5000_of_a_large_csv_is_a_read_away(ctx, conversation):
    table = attach(conversation, "big.csv", samples.large_csv(6_000))

    answer = call("read_document", ctx, attachment_id=str(table.pk), start=5000, end=5000)

    assert "| 5000 | 4999 | CODE-5000 |" in answer
    assert "rows 5000–5000 of 6,000 data rows" in answer


def test_a_long_read_stops_where_the_output_limit_is_and_says_where_to_go_on(ctx, conversation, settings):
    settings.CONTEXT_TOKEN_BUDGET = 256
    table = attach(conversation, "big.csv", samples.large_csv(500))

    answer = call("read_document", ctx, attachment_id=str(table.pk))

    assert len(answer) < 2_500
    last = answer.rsplit("[Continue with start=", 1)[1].rstrip(".]")
    assert f"| {int(last) - 1} |" in answer


def test_read_lines_of_json(ctx, conversation):
    data = attach(conversation, "a.json", samples.json_bytes())

    answer = call("read_document", ctx, attachment_id=str(data.pk), start=2, end=3)

    assert answer == 'a.json, lines 2–3 of 12:\n2:   "project": "Atlas",\n3:   "risks": ['


def test_an_image_has_nothing_to_read(ctx, conversation):
    image = attach(conversation, "chart.png", samples.png_bytes((64, 48)))

    assert "is an image (PNG, 64 × 48 pixels" in call("read_document", ctx, attachment_id=str(image.pk))


def test_unknown_sheets_and_files_are_named(ctx, conversation):
    book = attach(conversation, "book.xlsx", samples.two_sheet_xlsx())

    with pytest.raises(DocumentToolError, match='Its sheets: "Sales", "Staff"'):
        call("read_document", ctx, attachment_id=str(book.pk), sheet="Budget")
    with pytest.raises(DocumentToolError, match=r"no attached file 'other.pdf'.*\"book.xlsx\""):
        call("read_document", ctx, attachment_id="other.pdf")


def test_other_peoples_and_other_conversations_files_are_out_of_reach(ctx, conversation, alice, bob):
    elsewhere = services.conversation_create(owner=alice)
    mine_elsewhere = attach(elsewhere, "elsewhere.csv", samples.csv_bytes([("a", "b"), (1, 2)]))
    theirs = services.conversation_create(owner=bob)
    bobs = attach(theirs, "bob.csv", samples.csv_bytes([("a", "b"), (1, 2)]))

    for attachment in (mine_elsewhere, bobs):
        with pytest.raises(DocumentToolError, match="no attached file"):
            call("read_document", ctx, attachment_id=str(attachment.pk))
    bob_in_alices_chat = ToolContext(
        user=bob, conversation_id=str(conversation.pk), files=ConversationFiles(conversation.pk, bob)
    )
    attach(conversation, "alice.csv", samples.csv_bytes([("a", "b"), (1, 2)]))
    with pytest.raises(DocumentToolError, match="No file is attached"):
        call("read_document", bob_in_alices_chat, attachment_id="alice.csv")


# --- search_document ---------------------------------------------------------------------------------


def test_search_a_pdf_gives_page_numbers(ctx, conversation):
    report = attach(conversation, "report.pdf", samples.report_pdf())

    answer = call("search_document", ctx, attachment_id=str(report.pk), query="supplier delay")

    assert answer.startswith("2 matches for 'supplier delay' in report.pdf:")
    assert "- page 2: | Supplier delay | Procurement | High |" in answer
    assert "- page 3: Mitigate the supplier delay before the next audit." in answer


def test_search_a_table_gives_sheet_and_row(ctx, conversation):
    book = attach(conversation, "book.xlsx", samples.two_sheet_xlsx())

    answer = call("search_document", ctx, attachment_id=str(book.pk), query="petrov")

    assert answer == "1 matches for 'petrov' in book.xlsx:\n- sheet \"Staff\", row 3: Name: Petrov; Started: 2022-11-15"


def test_search_counts_what_it_does_not_show(ctx, conversation):
    table = attach(conversation, "big.csv", samples.large_csv(300))

    answer = call("search_document", ctx, attachment_id=str(table.pk), query="oslo", limit=2)

    assert answer.startswith("100 matches for 'oslo'")
    assert "[98 more matches are not shown.]" in answer


def test_no_match_is_said(ctx, conversation):
    data = attach(conversation, "a.json", samples.json_bytes())

    assert (
        call("search_document", ctx, attachment_id=str(data.pk), query="budget") == "No match for 'budget' in a.json."
    )


# --- query_table ---------------------------------------------------------------------------------


def test_query_row_5000_of_a_large_csv(ctx, conversation):
    table = attach(conversation, "big.csv", samples.large_csv(6_000))

    answer = call(
        "query_table", ctx, attachment_id=str(table.pk), filters=[{"column": "_row", "op": "eq", "value": 5000}]
    )

    assert answer == (
        "big.csv: 1 of 6,000 data rows match.\n| _row | id | code | city | amount |\n|---|---|---|---|---|\n"
        "| 5000 | 4999 | CODE-5000 | Lima | 50000 |"
    )


def test_query_groups_and_sums_a_sheet(ctx, conversation):
    book = attach(conversation, "book.xlsx", samples.two_sheet_xlsx())

    answer = call(
        "query_table",
        ctx,
        attachment_id=str(book.pk),
        group_by=["Region"],
        aggregates=[{"func": "sum", "column": "Amount"}, {"func": "count"}],
    )

    assert answer == (
        'sheet "Sales" of book.xlsx: 3 groups.\n| Region | sum(Amount) | count |\n|---|---|---|\n'
        "| North | 320 | 2 |\n| South | 80.5 | 1 |\n| East | 50 | 1 |"
    )


def test_query_pages_through_matches(ctx, conversation):
    table = attach(conversation, "big.csv", samples.large_csv(6_000))

    answer = call(
        "query_table",
        ctx,
        attachment_id=str(table.pk),
        filters=[{"column": "city", "op": "eq", "value": "lima"}, {"column": "amount", "op": "gte", "value": 59000}],
        columns=["code"],
        limit=3,
    )

    assert answer.startswith("big.csv: 34 of 6,000 data rows match.\n| _row | code |")
    assert "| 5900 | CODE-5900 |" in answer
    assert answer.endswith("[More: ask again with offset=3.]")


def test_a_bad_query_tells_the_model_what_to_fix(ctx, conversation):
    table = attach(conversation, "big.csv", samples.large_csv(10))

    with pytest.raises(DocumentToolError, match="no column 'price'"):
        call("query_table", ctx, attachment_id=str(table.pk), filters=[{"column": "price", "op": "gt", "value": 1}])


def test_query_is_for_tables_only(ctx, conversation):
    report = attach(conversation, "report.pdf", samples.report_pdf())

    with pytest.raises(DocumentToolError, match="not a table"):
        call("query_table", ctx, attachment_id=str(report.pk))
