// An answer drawn as Markdown while it streams. Tokens only change the text; the drawing waits for the next
// animation frame, so a burst of tokens costs one parse and one drawing. Blocks whose source did not change keep
// their elements: usually only the last one is drawn again. Every element is made with createElement and every
// word goes in as text, so nothing the model wrote can become markup. When the answer ends, the server's
// sanitized rendering takes this one's place (timeline.js).

import { framed } from "./code-blocks.js";
import { parseMarkdown, safeHref } from "./markdown.js";

const texts = new WeakMap(); // .msg-body → the answer's Markdown so far
const drawn = new WeakMap(); // .msg-body → [{key, node}], one per block, in order
const waiting = new Set();
let frame = 0;
// The conversation follows a growing answer when the reader is this close to its end (as timeline.js does).
const FOLLOW_PX = 160;

/** The Markdown an answer's body shows; a body drawn by the server before any token came shows it as text. */
export function streamedText(body) {
  return texts.has(body) ? texts.get(body) : body.textContent;
}

/** Shows `text` in a streaming answer's body, from the next animation frame. */
export function streamText(body, text) {
  texts.set(body, text);
  waiting.add(body);
  if (!frame) frame = requestAnimationFrame(drawWaiting);
}

/** The answers the server drew while they were streaming, as Markdown. */
export function drawStreaming(root) {
  for (const body of root.querySelectorAll(".msg-body.streaming")) streamText(body, streamedText(body));
}

function drawWaiting() {
  frame = 0;
  for (const body of waiting) {
    // The final rendering may have come meanwhile: it is not drawn over.
    if (!body.isConnected || !body.classList.contains("streaming")) continue;
    const list = body.closest(".messages");
    const following = list && list.scrollHeight - list.scrollTop - list.clientHeight < FOLLOW_PX;
    draw(body, texts.get(body));
    if (following) list.scrollTop = list.scrollHeight;
  }
  waiting.clear();
}

/** Draws `text` into `body`, keeping the elements of the blocks that are as they were. */
export function draw(body, text) {
  const blocks = parseMarkdown(text, { open: true });
  let kept = drawn.get(body) || [];
  if (kept.length !== body.childNodes.length || kept.some((entry, index) => body.childNodes[index] !== entry.node)) {
    body.replaceChildren();
    kept = [];
  }
  let same = 0;
  while (same < kept.length && same < blocks.length && kept[same].key === blocks[same].key) same += 1;
  for (const entry of kept.slice(same)) entry.node.remove();
  const entries = kept.slice(0, same);
  for (const block of blocks.slice(same)) {
    const node = framed(blockNode(block));
    body.append(node);
    entries.push({ key: block.key, node });
  }
  drawn.set(body, entries);
  placeCaret(body);
}

/** The blinking caret goes at the end of the deepest last element, where the next word will appear. */
function placeCaret(body) {
  body.querySelector(".caret")?.classList.remove("caret");
  let node = body.lastElementChild;
  while (node) {
    const inner = node.matches("pre") ? node.querySelector("code") : lastBlockChild(node);
    if (!inner) break;
    node = inner;
  }
  node?.classList.add("caret");
}

function lastBlockChild(node) {
  const last = node.lastElementChild;
  return last && last.matches("p, h1, h2, h3, h4, h5, h6, ul, ol, li, blockquote, table, tbody, thead, tr, td, th, pre, .code-block, .table-scroll") ? last : null;
}

const SPANS = { strong: "strong", em: "em", del: "s" };

function element(name, children = []) {
  const node = document.createElement(name);
  node.append(...children);
  return node;
}

function blockNode(block) {
  switch (block.type) {
    case "heading":
      return element(`h${block.level}`, inlineNodes(block.children));
    case "code": {
      const code = element("code");
      code.textContent = block.text;
      const pre = element("pre", [code]);
      if (block.lang) pre.dataset.lang = block.lang;
      return pre;
    }
    case "list": {
      const list = element(block.ordered ? "ol" : "ul", block.items.map((item) => listItem(item, block.tight)));
      if (block.ordered && block.start !== 1) list.start = block.start;
      return list;
    }
    case "quote":
      return element("blockquote", block.blocks.map(blockNode));
    case "table":
      return table(block);
    case "rule":
      return element("hr");
    default:
      return element("p", inlineNodes(block.children));
  }
}

/** In a tight list an item's paragraphs are not set apart, as the server renders it. */
function listItem(item, tight) {
  const children = item.blocks.flatMap((block) => (tight && block.type === "paragraph" ? inlineNodes(block.children) : [blockNode(block)]));
  return element("li", children);
}

function table(block) {
  const cell = (name, content, index) => {
    const node = element(name, inlineNodes(content));
    if (block.align[index]) node.style.textAlign = block.align[index];
    return node;
  };
  const head = element("thead", [element("tr", block.head.map((content, index) => cell("th", content, index)))]);
  const rows = block.rows.map((row) => element("tr", row.map((content, index) => cell("td", content, index))));
  return element("table", rows.length ? [head, element("tbody", rows)] : [head]);
}

function inlineNodes(nodes) {
  return nodes.map((node) => {
    switch (node.type) {
      case "text":
        return document.createTextNode(node.text);
      case "br":
        return element("br");
      case "code": {
        const code = element("code");
        code.textContent = node.text;
        return code;
      }
      case "link": {
        const href = safeHref(node.href);
        if (!href) return element("span", inlineNodes(node.children));
        const link = element("a", inlineNodes(node.children));
        link.href = href;
        link.target = "_blank";
        link.rel = "noopener noreferrer nofollow";
        return link;
      }
      default:
        return element(SPANS[node.type] || "span", inlineNodes(node.children));
    }
  });
}
