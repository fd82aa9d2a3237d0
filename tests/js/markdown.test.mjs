// The Markdown a streaming answer shows, on plain values: what each construct becomes, how a half-written end is
// read, which links are kept, and that a long answer stays cheap to parse again at every frame.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { parseInline, parseMarkdown, safeHref } from "../../static/js/chat/markdown.js";

const text = (value) => ({ type: "text", text: value });
const strip = (blocks) => JSON.parse(JSON.stringify(blocks, (key, value) => (key === "key" ? undefined : value)));
const parse = (source, options) => strip(parseMarkdown(source, options));

describe("blocks", () => {
  test("paragraphs and headings, ATX and underlined", () => {
    assert.deepEqual(parse("## Result\n\nFirst line\nsame paragraph\n\nTitle\n===\n"), [
      { type: "heading", level: 2, children: [text("Result")] },
      { type: "paragraph", children: [text("First line\nsame paragraph")] },
      { type: "heading", level: 1, children: [text("Title")] },
    ]);
    assert.deepEqual(parse("#hashtag"), [{ type: "paragraph", children: [text("#hashtag")] }]);
  });

  test("fenced code keeps its text and language; an unclosed fence runs to the end", () => {
    assert.deepEqual(parse("```python\nprint('<b>')\n```\nafter"), [
      { type: "code", lang: "python", text: "print('<b>')\n" },
      { type: "paragraph", children: [text("after")] },
    ]);
    assert.deepEqual(parse("~~~\nx = 1\n\ny = 2"), [{ type: "code", lang: "", text: "x = 1\n\ny = 2" }]);
    assert.deepEqual(parse("```\n```"), [{ type: "code", lang: "", text: "" }]);
  });

  test("lists: bullets, numbers with their start, nesting, tight and loose", () => {
    const [bullets] = parse("- one\n- two\n  - inner\n");
    assert.equal(bullets.tight, true);
    assert.deepEqual(bullets.items[1].blocks, [
      { type: "paragraph", children: [text("two")] },
      { type: "list", ordered: false, start: 1, tight: true, items: [{ blocks: [{ type: "paragraph", children: [text("inner")] }] }] },
    ]);
    const [numbers] = parse("3. three\n\n4. four\n");
    assert.deepEqual([numbers.ordered, numbers.start, numbers.tight, numbers.items.length], [true, 3, false, 2]);
    assert.equal(parse("- a\n* b").length, 2, "another bullet sign starts another list");
    assert.deepEqual(parse("Intro:\n- a\n- b").map((block) => block.type), ["paragraph", "list"]);
  });

  test("a lazy line continues the item's paragraph", () => {
    const [list] = parse("- a long item\nthat goes on\n- next");
    assert.deepEqual(list.items[0].blocks, [{ type: "paragraph", children: [text("a long item\nthat goes on")] }]);
  });

  test("tables with their alignment; short rows are padded", () => {
    assert.deepEqual(parse("| dashboard | status |\n| :-- | ---: |\n| Sales | ok |\n| Churn |\n"), [
      {
        type: "table",
        align: ["left", "right"],
        head: [[text("dashboard")], [text("status")]],
        rows: [
          [[text("Sales")], [text("ok")]],
          [[text("Churn")], []],
        ],
      },
    ]);
    assert.equal(parse("a | b\n--- | ---\n1 | 2")[0].type, "table");
    assert.equal(parse("| a | b |\n| --- |\n")[0].type, "paragraph", "the delimiter row must match the header");
  });

  test("quotes and rules", () => {
    assert.deepEqual(parse("> quoted\nlazy\n\n---\n"), [
      { type: "quote", blocks: [{ type: "paragraph", children: [text("quoted\nlazy")] }] },
      { type: "rule" },
    ]);
  });

  test("HTML is text", () => {
    assert.deepEqual(parse('<script>alert(1)</script><img src=x onerror="alert(1)">'), [
      { type: "paragraph", children: [text('<script>alert(1)</script><img src=x onerror="alert(1)">')] },
    ]);
  });
});

describe("inline", () => {
  test("emphasis, strong, strikethrough and code", () => {
    assert.deepEqual(parseInline("**bold** *em* ~~old~~ `a**b`"), [
      { type: "strong", children: [text("bold")] },
      text(" "),
      { type: "em", children: [text("em")] },
      text(" "),
      { type: "del", children: [text("old")] },
      text(" "),
      { type: "code", text: "a**b" },
    ]);
    assert.deepEqual(parseInline("***both***"), [{ type: "strong", children: [{ type: "em", children: [text("both")] }] }]);
  });

  test("underscores inside words and lone stars are text", () => {
    assert.deepEqual(parseInline("snake_case_name, 2 * 3 * 4, \\*not\\*"), [text("snake_case_name, 2 * 3 * 4, *not*")]);
  });

  test("line breaks: two spaces or a backslash break, a plain newline does not", () => {
    assert.deepEqual(parseInline("a  \nb\\\nc\nd"), [text("a"), { type: "br" }, text("b"), { type: "br" }, text("c\nd")]);
  });

  test("links to http and https only; any other address leaves the label as text", () => {
    assert.deepEqual(parseInline("[docs](https://example.com/a_(b) \"t\")"), [
      { type: "link", href: "https://example.com/a_(b)", children: [text("docs")] },
    ]);
    for (const address of ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html;base64,PHNjcmlwdD4=", "/relative", "mailto:a@b.c"]) {
      assert.deepEqual(parseInline(`[x](${address})`), [text("x")], address);
    }
    assert.deepEqual(parseInline("<http://example.com>"), [
      { type: "link", href: "http://example.com/", children: [text("http://example.com")] },
    ]);
    assert.deepEqual(parseInline("[label] and [x]"), [text("[label] and [x]")]);
  });

  test("safeHref normalises http(s) addresses and refuses the rest", () => {
    assert.equal(safeHref(" https://Example.com/a b"), "https://example.com/a%20b");
    assert.equal(safeHref("java\nscript:alert(1)"), null);
    assert.equal(safeHref("//evil.example"), null);
  });
});

describe("an answer still being written", () => {
  test("what is begun at the end shows as if closed", () => {
    assert.deepEqual(parse("Some **bol", { open: true }), [
      { type: "paragraph", children: [text("Some "), { type: "strong", children: [text("bol")] }] },
    ]);
    assert.deepEqual(parse("Run `make te", { open: true })[0].children, [text("Run "), { type: "code", text: "make te" }]);
    assert.deepEqual(parse("See [the docs](https://exa", { open: true })[0].children, [text("See "), text("the docs")]);
    assert.deepEqual(parse("Trailing **", { open: true })[0].children, [text("Trailing ")]);
  });

  test("only in the last block: an earlier one reads as it will at the end", () => {
    const blocks = parse("a **b\n\nc *d", { open: true });
    assert.deepEqual(blocks[0].children, [text("a **b")]);
    assert.deepEqual(blocks[1].children, [text("c "), { type: "em", children: [text("d")] }]);
    assert.deepEqual(parse("a **b")[0].children, [text("a **b")], "a finished text closes nothing");
  });

  test("a table shows as soon as its delimiter row begins", () => {
    const [table] = parse("| a | b |\n| --", { open: true });
    assert.equal(table.type, "table");
    assert.deepEqual(table.rows, []);
    assert.equal(parse("| a | b |\n| --- | :", { open: true })[0].type, "table");
    assert.equal(parse("| a | b |\n| --- | :")[0].type, "paragraph");
  });

  test("a lone dash being written is not an underline yet", () => {
    assert.deepEqual(parse("Intro\n-", { open: true }).map((block) => block.type), ["paragraph"]);
  });

  test("a block keeps its key while it does not change, so the page keeps its elements", () => {
    const before = parseMarkdown("# Title\n\nFirst paragraph.\n\nSecond", { open: true });
    const after = parseMarkdown("# Title\n\nFirst paragraph.\n\nSecond one", { open: true });
    assert.deepEqual(before.slice(0, 2).map((block) => block.key), after.slice(0, 2).map((block) => block.key));
    assert.notEqual(before[2].key, after[2].key);
    const closed = parseMarkdown("a **b\n\nmore", { open: true });
    assert.notEqual(parseMarkdown("a **b", { open: true })[0].key, closed[0].key, "the open block is drawn again once closed");
  });
});

test("a 5,000-character answer parses in a few milliseconds, and so does one made to be slow", () => {
  const answer = (
    "## Findings\n\nThe **revenue** dashboard has `3` failing checks; see [the runbook](https://example.com/run).\n\n" +
    "| dashboard | status | errors |\n| --- | :---: | ---: |\n| Sales | ok | 0 |\n| Churn | failing | 12 |\n\n" +
    "```python\nfor check in checks:\n    print(check.name, check.status)\n```\n\n- first *point*\n- second point\n\n"
  ).repeat(17);
  const hostile = ["*a ", "_b ", "[c ", "``d `", "~~a "].map((piece) => piece.repeat(300)).join("");
  for (const source of [answer, hostile]) {
    assert.ok(source.length >= 5000);
    const started = performance.now();
    const runs = 20;
    for (let n = 0; n < runs; n += 1) parseMarkdown(source, { open: true });
    const perRun = (performance.now() - started) / runs;
    assert.ok(perRun < 25, `${perRun.toFixed(2)} ms per parse`);
  }
});
