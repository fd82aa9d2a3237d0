// Markdown as an answer shows while it streams, without the DOM: a small subset of what the server renders
// (paragraphs, headings, emphasis, code, lists, quotes, tables, http(s) links), parsed into plain objects that
// streaming.js turns into elements. Nothing here makes HTML. When the answer ends, the server's rendering
// replaces this one, so what is left out here (HTML, images, reference links) only shows as text until then.
//
// `open`: the text is still being written, so its end may be cut short. An emphasis, code span or link begun in
// the last block and not closed yet is shown as if it were, rather than as a stray `**` or `[` for a moment
// (the outermost one only: what it holds is read as finished text, which keeps a hostile text cheap to read).

const FENCE = /^( {0,3})(`{3,}|~{3,})[ \t]*([^\s`]*)/;
const CLOSING_FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const BULLET = /^( {0,3})([-*+])(?:([ \t]+)(.*))?$/;
const ORDERED = /^( {0,3})(\d{1,9})([.)])(?:([ \t]+)(.*))?$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const DELIMITER_ROW = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const PARTIAL_DELIMITER_ROW = /^ {0,3}[|:\- \t]*-[|:\- \t]*$/;
const BLANK = /^[ \t]*$/;
const ESCAPABLE = /[!-/:-@[-`{-~]/;
const WORD = /[\p{L}\p{N}]/u;
const SPACE = /\s/;

/** An absolute http(s) address as the page may link to it, or null. */
export function safeHref(address) {
  let url;
  try {
    url = new URL(address.trim());
  } catch {
    return null;
  }
  return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
}

/**
 * The blocks of `text`, each {type, key, ...}: paragraph and heading {children}, code {lang, text}, list
 * {ordered, start, tight, items: [{blocks}]}, quote {blocks}, table {align, head, rows}, rule. `key` is the same
 * for the same source, so a page can keep what it drew for the blocks that did not change.
 */
export function parseMarkdown(text, { open = false } = {}) {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  const blocks = parseBlocks(lines, open && !text.endsWith("\n"));
  blocks.forEach((block, index) => {
    const tail = open && index === blocks.length - 1;
    block.key = `${block.type}${tail ? "+" : ""}:${lines.slice(block.from, block.to).join("\n")}`;
    delete block.from;
    delete block.to;
    addInline(block, tail);
  });
  return blocks;
}

/** The blocks of `lines`, with their line ranges; `cut`: the last line may still be incomplete. */
function parseBlocks(lines, cut) {
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    if (BLANK.test(lines[i])) {
      i += 1;
      continue;
    }
    const [block, next] = parseBlock(lines, i, cut);
    block.from = i;
    block.to = next;
    blocks.push(block);
    i = next;
  }
  return blocks;
}

function parseBlock(lines, i, cut) {
  const line = lines[i];
  let match;
  if ((match = FENCE.exec(line))) return fencedCode(lines, i, match);
  if ((match = HEADING.exec(line))) return [{ type: "heading", level: match[1].length, source: match[2] || "" }, i + 1];
  if (RULE.test(line)) return [{ type: "rule" }, i + 1];
  if (QUOTE.test(line)) return quote(lines, i, cut);
  if (marker(line)) return list(lines, i, cut);
  if (tableStarts(lines, i, cut)) return table(lines, i, cut);
  return paragraph(lines, i, cut);
}

function fencedCode(lines, i, [, indent, fence, info]) {
  const body = [];
  for (let j = i + 1; j < lines.length; j += 1) {
    const closing = CLOSING_FENCE.exec(lines[j]);
    if (closing && closing[1][0] === fence[0] && closing[1].length >= fence.length) {
      return [{ type: "code", lang: info, text: body.map((line) => `${line}\n`).join("") }, j + 1];
    }
    body.push(lines[j].slice(Math.min(indent.length, indentOf(lines[j]))));
  }
  // Not closed (yet): the code goes on to the end, where the next line will continue it.
  return [{ type: "code", lang: info, text: body.join("\n") }, lines.length];
}

/** Whether line `j` starts a block that ends the paragraph before it. */
function interrupts(lines, j, cut) {
  const line = lines[j];
  if (FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)) return true;
  const item = marker(line);
  if (item && item.rest && (!item.ordered || item.start === 1)) return true;
  return tableStarts(lines, j, cut);
}

function paragraph(lines, i, cut) {
  const parts = [lines[i].trim()];
  let j = i + 1;
  for (; j < lines.length && !BLANK.test(lines[j]); j += 1) {
    const setext = SETEXT.exec(lines[j]);
    // A lone "-" still being written is more likely a list item to come than an underline.
    if (setext && !(cut && j === lines.length - 1)) {
      return [{ type: "heading", level: setext[1][0] === "=" ? 1 : 2, source: parts.join("\n") }, j + 1];
    }
    if (interrupts(lines, j, cut)) break;
    parts.push(lines[j].trim());
  }
  return [{ type: "paragraph", source: parts.join("\n") }, j];
}

function quote(lines, i, cut) {
  const inner = [];
  let j = i;
  for (; j < lines.length; j += 1) {
    const match = QUOTE.exec(lines[j]);
    if (match) inner.push(match[1]);
    else if (!BLANK.test(lines[j]) && !BLANK.test(lines[j - 1]) && !interrupts(lines, j, cut)) inner.push(lines[j]);
    else break;
  }
  return [{ type: "quote", blocks: parseBlocks(inner, cut && j === lines.length) }, j];
}

function marker(line) {
  const bullet = BULLET.exec(line);
  if (bullet) return { ordered: false, sign: bullet[2], indent: bullet[1].length, width: 1, gap: bullet[3] || "", rest: bullet[4] ?? "" };
  const ordered = ORDERED.exec(line);
  if (!ordered) return null;
  return {
    ordered: true,
    sign: ordered[3],
    start: Number(ordered[2]),
    indent: ordered[1].length,
    width: ordered[2].length + 1,
    gap: ordered[4] || "",
    rest: ordered[5] ?? "",
  };
}

const sameList = (a, b) => Boolean(b) && a.ordered === b.ordered && a.sign === b.sign;

function list(lines, i, cut) {
  const first = marker(lines[i]);
  const items = [];
  let loose = false;
  let j = i;
  while (j < lines.length) {
    const item = marker(lines[j]);
    if (!sameList(first, item) || RULE.test(lines[j])) break;
    // The content starts after the marker and one to four spaces; past four, one, and the rest is indentation.
    const wide = item.gap.length > 4;
    const offset = item.indent + item.width + (wide ? 1 : Math.max(item.gap.length, 1));
    const content = [wide ? item.gap.slice(1) + item.rest : item.rest];
    j += 1;
    while (j < lines.length) {
      const line = lines[j];
      if (BLANK.test(line)) {
        const next = lines.slice(j + 1).find((later) => !BLANK.test(later));
        if (next === undefined || indentOf(next) < offset) break;
        content.push("");
        loose = true;
      } else if (indentOf(line) >= offset) {
        content.push(line.slice(offset));
      } else if (marker(line) || interrupts(lines, j, cut)) {
        break;
      } else {
        content.push(line.trim()); // a lazy continuation of the item's paragraph
      }
      j += 1;
    }
    items.push({ blocks: parseBlocks(content, cut && j === lines.length) });
    let k = j;
    while (k < lines.length && BLANK.test(lines[k])) k += 1;
    if (k === lines.length || !sameList(first, marker(lines[k]))) break;
    if (k > j) loose = true;
    j = k;
  }
  return [{ type: "list", ordered: first.ordered, start: first.start ?? 1, tight: !loose, items }, j];
}

function indentOf(line) {
  return /^[ \t]*/.exec(line)[0].replace(/\t/g, "    ").length;
}

function cells(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  const found = [];
  let cell = "";
  for (let k = 0; k < row.length; k += 1) {
    if (row[k] === "\\" && row[k + 1] === "|") {
      cell += "|";
      k += 1;
    } else if (row[k] === "|") {
      found.push(cell.trim());
      cell = "";
    } else {
      cell += row[k];
    }
  }
  found.push(cell.trim());
  return found;
}

/** A header row over a delimiter row; the delimiter row may be half written when it is the last line. */
function tableStarts(lines, i, cut) {
  if (!lines[i].includes("|") || i + 1 >= lines.length) return false;
  const delimiter = lines[i + 1];
  if (DELIMITER_ROW.test(delimiter) && cells(delimiter).length === cells(lines[i]).length) return true;
  return cut && i + 2 === lines.length && PARTIAL_DELIMITER_ROW.test(delimiter);
}

function table(lines, i, cut) {
  const head = cells(lines[i]);
  const specs = cells(lines[i + 1]);
  const align = head.map((_, k) => {
    const spec = specs[k] || "";
    if (spec.startsWith(":") && spec.endsWith(":") && spec.length > 1) return "center";
    if (spec.endsWith(":")) return "right";
    return spec.startsWith(":") ? "left" : "";
  });
  const rows = [];
  let j = i + 2;
  for (; j < lines.length && !BLANK.test(lines[j]) && !interrupts(lines, j, cut); j += 1) {
    const row = cells(lines[j]);
    rows.push(head.map((_, k) => row[k] ?? ""));
  }
  return [{ type: "table", align, head, rows }, j];
}

/** The inline content of `block` and the blocks in it; `open` goes down to the last of them only. */
function addInline(block, open) {
  const lastOf = (array, index) => open && index === array.length - 1;
  if (block.type === "paragraph" || block.type === "heading") {
    block.children = parseInline(block.source, open);
    delete block.source;
  } else if (block.type === "table") {
    const bodyless = !block.rows.length;
    block.head = block.head.map((cell, k) => parseInline(cell, bodyless && lastOf(block.head, k)));
    block.rows = block.rows.map((row, r) => row.map((cell, k) => parseInline(cell, lastOf(block.rows, r) && lastOf(row, k))));
  } else if (block.type === "list") {
    block.items.forEach((item, k) => {
      item.blocks.forEach((inner, b) => addInline(inner, lastOf(block.items, k) && b === item.blocks.length - 1));
    });
  } else if (block.type === "quote") {
    block.blocks.forEach((inner, b) => addInline(inner, lastOf(block.blocks, b)));
  }
  for (const inner of [...(block.blocks || []), ...(block.items || []).flatMap((item) => item.blocks)]) {
    delete inner.from;
    delete inner.to;
  }
}

// --- inline ---------------------------------------------------------------------------------------------

/** Inline nodes: {type: text, text}, {type: strong|em|del|link, children, href?}, {type: code, text}, {type: br}. */
export function parseInline(source, open = false) {
  const nodes = [];
  const runs = new Runs(source);
  let text = "";
  const flush = () => {
    if (text) nodes.push({ type: "text", text });
    text = "";
  };
  const add = (span) => {
    if (span.nodes?.length) {
      flush();
      nodes.push(...span.nodes);
    } else if (span.literal) {
      text += span.literal;
    }
    return span.next;
  };
  let i = 0;
  while (i < source.length) {
    const c = source[i];
    if (c === "\\" && source[i + 1] === "\n") {
      i = add({ nodes: [{ type: "br" }], next: i + 2 });
    } else if (c === "\\" && ESCAPABLE.test(source[i + 1] || "")) {
      text += source[i + 1];
      i += 2;
    } else if (c === "\n") {
      const hard = / {2,}$/.test(text);
      text = text.replace(/ +$/, "");
      i = hard ? add({ nodes: [{ type: "br" }], next: i + 1 }) : add({ literal: "\n", next: i + 1 });
    } else if (c === "`") {
      i = add(codeSpan(source, i, open, runs));
    } else if (c === "[") {
      i = add(linkAt(source, i, open, runs) || { literal: c, next: i + 1 });
    } else if (c === "<") {
      i = add(autolink(source, i) || { literal: c, next: i + 1 });
    } else if (c === "*" || c === "_" || c === "~") {
      i = add(emphasis(source, i, open, runs));
    } else {
      text += c;
      i += 1;
    }
  }
  flush();
  return nodes;
}

/**
 * Where the delimiters of one text are, found once: a text full of delimiters that close nothing (`*a *b *c…`)
 * would otherwise be searched to its end from every one of them.
 */
class Runs {
  constructor(source) {
    this.source = source;
    this.found = new Map();
  }

  memo(key, make) {
    if (!this.found.has(key)) this.found.set(key, make());
    return this.found.get(key);
  }

  /** The starts of the runs of exactly `n` backticks. */
  backticks(n) {
    return this.memo(`\`${n}`, () => this.all("`").filter(([, length]) => length === n).map(([start]) => start));
  }

  /** [start, length] of every run of `c`. */
  all(c) {
    return this.memo(c, () => Array.from(this.source.matchAll(new RegExp(`\\${c}+`, "g")), (match) => [match.index, match[0].length]));
  }

  /** Where each run of `c` that can close an emphasis of `size` delimiters has them: its last `size` characters. */
  closers(c, size) {
    return this.memo(`${c}${size}`, () =>
      this.all(c)
        .filter(([start, length]) => length >= size && !SPACE.test(this.source[start - 1] || " ") && !(c === "_" && WORD.test(this.source[start + length] || " ")))
        .map(([start, length]) => start + length - size),
    );
  }

  lastIndexOf(c) {
    return this.memo(`last${c}`, () => this.source.lastIndexOf(c));
  }
}

/** The first of the sorted `positions` at or after `from`, or -1. */
function firstFrom(positions, from) {
  let low = 0;
  let high = positions.length;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (positions[middle] < from) low = middle + 1;
    else high = middle;
  }
  return low < positions.length ? positions[low] : -1;
}

function runLength(source, i) {
  let n = 1;
  while (source[i + n] === source[i]) n += 1;
  return n;
}

function codeSpan(source, i, open, runs) {
  const n = runLength(source, i);
  const close = firstFrom(runs.backticks(n), i + n);
  if (close >= 0) return { nodes: [{ type: "code", text: codeText(source.slice(i + n, close)) }], next: close + n };
  if (!open) return { literal: source.slice(i, i + n), next: i + n };
  const rest = source.slice(i + n);
  return { nodes: rest ? [{ type: "code", text: codeText(rest) }] : [], next: source.length };
}

function codeText(raw) {
  const text = raw.replace(/\n/g, " ");
  return /^ .*[^ ].* $/.test(text) ? text.slice(1, -1) : text;
}

/** `[label](address)`: a link to an http(s) address, the label alone to any other; null when it is no link. */
function linkAt(source, i, open, runs) {
  const close = matching(source, i, "[", "]", runs);
  if (close < 0) return open ? { nodes: parseInline(source.slice(i + 1)), next: source.length } : null;
  if (source[close + 1] !== "(") return null;
  const children = parseInline(source.slice(i + 1, close));
  const end = matching(source, close + 1, "(", ")", runs);
  if (end < 0) return open && !/\s/.test(source.slice(close + 2)) ? { nodes: children, next: source.length } : null;
  const target = /^[ \t]*<?([^\s<>]*)>?(?:[ \t]+(?:"[^"]*"|'[^']*'))?[ \t]*$/.exec(source.slice(close + 2, end));
  if (!target) return null;
  const href = safeHref(target[1]);
  return { nodes: href ? [{ type: "link", href, children }] : children, next: end + 1 };
}

/** The index of the bracket that closes the one at `i`, or -1. */
function matching(source, i, opening, closing, runs) {
  if (runs.lastIndexOf(closing) < i) return -1;
  let depth = 0;
  for (let k = i; k < source.length; k += 1) {
    if (source[k] === "\\") k += 1;
    else if (source[k] === opening) depth += 1;
    else if (source[k] === closing && --depth === 0) return k;
  }
  return -1;
}

function autolink(source, i) {
  const match = /^<(https?:\/\/[^\s<>]*)>/i.exec(source.slice(i, i + 2048));
  const href = match && safeHref(match[1]);
  return href ? { nodes: [{ type: "link", href, children: [{ type: "text", text: match[1] }] }], next: i + match[0].length } : null;
}

const EMPHASIS = { "*": ["em", "strong"], _: ["em", "strong"], "~": [null, "del"] };

/** `*em*`, `**strong**`, `_em_`, `__strong__`, `~~del~~`, or the delimiters as text. */
function emphasis(source, i, open, runs) {
  const c = source[i];
  const n = runLength(source, i);
  if (open && i + n === source.length) return { next: i + n }; // what they open has not come yet
  const literal = { literal: source.slice(i, i + n), next: i + n };
  const after = source[i + n] || " ";
  if (SPACE.test(after) || (c === "_" && WORD.test(source[i - 1] || " "))) return literal;
  const size = c === "~" ? (n === 2 ? 2 : 0) : Math.min(n, 2);
  if (!size) return literal;
  const type = EMPHASIS[c][size - 1];
  const from = i + size;
  const close = firstFrom(runs.closers(c, size), from + 1);
  if (close >= 0) return { nodes: [{ type, children: parseInline(source.slice(from, close)) }], next: close + size };
  if (open) {
    const rest = source.slice(from);
    return { nodes: rest ? [{ type, children: parseInline(rest) }] : [], next: source.length };
  }
  // `***a*` has no closer for its strong part: the rest of the run is read again, as emphasis.
  return { literal: source.slice(i, from), next: from };
}
