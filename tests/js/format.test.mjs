// Words and numbers the page makes without the DOM (in English: node has no translation catalogue).
import assert from "node:assert/strict";
import { test } from "node:test";

import { fileProblem, formatSize, moment, newClientId, pretty } from "../../static/js/chat/format.js";
import { fill } from "../../static/js/chat/i18n.js";

const RULES = { maxBytes: 10 * 1024 * 1024, extensions: [".pdf", ".xlsx", ".csv", ".json", ".png", ".jpg", ".jpeg"] };

test("JSON is indented for reading; other text stays as it is", () => {
  assert.equal(pretty('{"n":1}'), '{\n  "n": 1\n}');
  assert.equal(pretty({ q: "Sales" }), '{\n  "q": "Sales"\n}');
  assert.equal(pretty("Error: boom"), "Error: boom");
});

test("sizes in B, KB and MB", () => {
  assert.deepEqual([formatSize(512), formatSize(2048), formatSize(3.5 * 1024 * 1024)], ["512 B", "2 KB", "3.5 MB"]);
});

test("the browser refuses other kinds of file, files over the limit and empty files", () => {
  assert.equal(fileProblem({ name: "report.PDF", size: 10 }, RULES), "");
  assert.match(fileProblem({ name: "setup.exe", size: 10 }, RULES), /^setup\.exe: this kind of file is not supported/);
  assert.match(fileProblem({ name: "README", size: 10 }, RULES), /not supported/);
  assert.equal(fileProblem({ name: "huge.csv", size: RULES.maxBytes + 1 }, RULES), "huge.csv is larger than 10 MB.");
  assert.equal(fileProblem({ name: "blank.json", size: 0 }, RULES), "blank.json is empty.");
});

test("placeholders are filled, unknown ones left as they are", () => {
  assert.equal(fill("%(name)s is %(what)s", { name: "x" }), "x is %(what)s");
});

test("client ids differ", () => {
  assert.notEqual(newClientId(), newClientId());
});

test("a moment is its time alone on its day, its day and time in its year, its whole date before", () => {
  const now = new Date(2026, 11, 5, 22, 0);
  const said = (when, lang) => moment(when, now, lang).replace(/\s/g, " ");
  assert.equal(said(new Date(2026, 11, 5, 9, 38), "en-US"), "9:38 AM");
  assert.equal(said(new Date(2026, 5, 22, 21, 38), "en-US"), "Jun 22, 9:38 PM");
  assert.equal(said(new Date(2025, 11, 5, 21, 38), "en-US"), "Dec 5, 2025, 9:38 PM");
  assert.equal(said(new Date(2026, 11, 5, 9, 38), "ru"), "09:38");
  assert.equal(said(new Date(2026, 5, 22, 21, 38), "ru"), "22 июн., 21:38");
  assert.equal(said(new Date(2025, 11, 5, 21, 38), "ru"), "5 дек. 2025 г., 21:38");
});
