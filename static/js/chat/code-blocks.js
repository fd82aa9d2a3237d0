// Code blocks and tables in answers. A code block gets its language and a Copy button above it; it and every table
// scroll sideways inside their frame, which the keyboard can reach, instead of widening or breaking the page.

import { copyText } from "./actions.js";
import { clone } from "./dom.js";

/** `node` as it is to be shown: a code block or a table in its frame, anything else with those inside it framed. */
export function framed(node) {
  if (node.matches("pre")) return frameCode(node);
  if (node.matches("table")) return frameTable(node);
  decorateMarkdown(node);
  return node;
}

/** Frames the code blocks and tables of rendered Markdown under `root` that have no frame yet. */
export function decorateMarkdown(root) {
  for (const pre of root.querySelectorAll(".markdown pre")) if (!pre.closest(".code-block")) frameCode(pre);
  for (const table of root.querySelectorAll(".markdown table")) if (!table.closest(".table-scroll")) frameTable(table);
}

function frameCode(pre) {
  const frame = clone("code-block");
  if (pre.dataset.lang) frame.querySelector(".code-lang").textContent = pre.dataset.lang;
  pre.tabIndex = 0;
  pre.replaceWith(frame);
  frame.append(pre);
  return frame;
}

function frameTable(table) {
  // A cell of one word, number or date is never broken; the table scrolls instead.
  for (const cell of table.querySelectorAll("th, td")) cell.classList.toggle("whole", !/\s/.test(cell.textContent.trim()));
  const frame = document.createElement("div");
  frame.className = "table-scroll";
  frame.tabIndex = 0;
  table.replaceWith(frame);
  frame.append(table);
  return frame;
}

/** The Copy buttons of the code blocks in `list`, which copy as a message's Copy does. */
export function copyCodeOnClick(list, notices) {
  list.addEventListener("click", (event) => {
    const button = event.target.closest(".code-copy");
    if (button) copyText(button.closest(".code-block").querySelector("code").textContent, button, notices);
  });
}
