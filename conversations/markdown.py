"""Markdown for the pages: markdown-it-py renders, nh3 keeps only harmless HTML.

What the model or a person wrote never reaches the page as live markup: raw HTML in the text is shown
as text (markdown-it's `html` option is off), and nh3 then removes anything that is still not on the
allow-list (script, style, event handlers, javascript: links…), as a second line of defence.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

TAGS = {
    "a", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "li", "ol", "p",
    "pre", "s", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
    "td": {"style"},
    "th": {"style"},
}
URL_SCHEMES = {"http", "https", "mailto"}

_parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)


def render_markdown(text: str) -> str:
    """`text` as sanitized HTML: paragraphs, lists, tables, code blocks, links that open safely."""
    if not text:
        return ""
    return nh3.clean(
        _parser.render(text),
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
        set_tag_attribute_values={"a": {"target": "_blank"}},
    )
