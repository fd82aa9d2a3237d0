"""Markdown for the pages: markdown-it-py renders, Pygments colours code blocks, nh3 keeps only harmless HTML.

What the model or a person wrote never reaches the page as live markup: raw HTML in the text is shown
as text (markdown-it's `html` option is off), and nh3 then removes anything that is still not on the
allow-list (script, style, event handlers, javascript: links, any class but Pygments' own…), as a second
line of defence.
"""

from __future__ import annotations

import html
import re

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "li", "ol", "p",
    "pre", "s", "span", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "pre": {"data-lang"},
    "td": {"style"},
    "th": {"style"},
}
URL_SCHEMES = {"http", "https", "mailto"}
# The classes Pygments gives its tokens (`k` keyword, `s2` string…): the only ones a span may keep.
CLASSES = {"span": {name for name in STANDARD_TYPES.values() if name}}
LANGUAGE = re.compile(r"[\w+#.-]{1,40}")
# Longer code is shown without colours: a lexer's time grows with its input, and this runs on every read.
HIGHLIGHT_MAX_CHARS = 100_000
_formatter = HtmlFormatter(nowrap=True)


def _code_block(code: str, language: str, _attributes: str) -> str:
    """A fenced block as `<pre data-lang>`, coloured when Pygments knows its language; the page labels it."""
    if not LANGUAGE.fullmatch(language):
        return ""  # markdown-it draws it plain
    try:
        lexer = get_lexer_by_name(language)
    except ClassNotFound:
        lexer = None
    body = html.escape(code) if lexer is None or len(code) > HIGHLIGHT_MAX_CHARS else highlight(code, lexer, _formatter)
    return f'<pre data-lang="{html.escape(language)}"><code>{body}</code></pre>'


_parser = MarkdownIt(
    "commonmark", {"html": False, "linkify": False, "typographer": False, "highlight": _code_block}
).enable(["table", "strikethrough"])


def render_markdown(text: str) -> str:
    """`text` as sanitized HTML: paragraphs, lists, tables, coloured code blocks, links that open safely."""
    if not text:
        return ""
    return nh3.clean(
        _parser.render(text),
        tags=TAGS,
        attributes=ATTRIBUTES,
        allowed_classes=CLASSES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
        set_tag_attribute_values={"a": {"target": "_blank"}},
    )
