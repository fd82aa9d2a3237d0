"""Markdown for the pages: the useful parts rendered, anything that could run script removed."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from conversations.api.serializers import MessageSerializer
from conversations.markdown import render_markdown
from conversations.models import Message


def test_code_blocks_tables_lists_and_links():
    html = render_markdown(
        "# Title\n\n```python\nprint('<b>')\n```\n\n| a | b |\n| :-- | --: |\n| 1 | 2 |\n\n- one\n- two\n\n"
        "1. first\n\n[docs](https://example.com) ~~old~~ `inline`"
    )
    assert "<h1>Title</h1>" in html
    assert (
        '<pre data-lang="python"><code><span class="nb">print</span><span class="p">(</span>'
        '<span class="s1">\'&lt;b&gt;\'</span><span class="p">)</span>\n</code></pre>'
    ) in html
    assert '<th style="text-align:left">a</th>' in html
    assert "<ul>\n<li>one</li>" in html and "<ol>" in html
    assert '<a href="https://example.com" target="_blank" rel="noopener noreferrer nofollow">docs</a>' in html
    assert "<s>old</s>" in html and "<code>inline</code>" in html


@pytest.mark.parametrize(
    "text",
    [
        "<script>alert(1)</script>",
        '<img src=x onerror="alert(1)">',
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
        '<a href="javascript:alert(1)">x</a>',
        "<iframe src=//evil></iframe>",
        '<svg onload="alert(1)"></svg>',
        "![x](https://example.com/a.png)",
        "<style>body{display:none}</style>",
        '| a |\n| - |\n| <b onmouseover="alert(1)">x</b> |',
    ],
)
def test_nothing_active_survives(text):
    elements = parse(render_markdown(text))
    for tag, attributes in elements:
        assert tag in {"p", "a", "table", "thead", "tbody", "tr", "th", "td", "strong", "em", "code", "pre"}, tag
        for name, value in attributes:
            assert not name.startswith("on"), (tag, name)
            if name == "href":
                assert value.startswith(("https:", "http:", "mailto:")), value


class Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, attrs))


def parse(html: str) -> list[tuple[str, list]]:
    parser = Elements()
    parser.feed(html)
    return parser.found


def test_code_blocks_are_coloured_when_their_language_is_known_and_labelled_with_it():
    assert render_markdown("```sql\nSELECT 1;\n```") == (
        '<pre data-lang="sql"><code><span class="k">SELECT</span><span class="w"> </span>'
        '<span class="mi">1</span><span class="p">;</span>\n</code></pre>\n'
    )
    assert render_markdown("```klingon\nx < y\n```") == '<pre data-lang="klingon"><code>x &lt; y\n</code></pre>\n'
    assert render_markdown("```\nplain\n```") == "<pre><code>plain\n</code></pre>\n"


@pytest.mark.parametrize(
    "fence",
    ['```"><script>alert(1)</script>', "```python onclick=alert(1)", '```x" class="evil'],
)
def test_a_language_cannot_carry_markup_or_classes(fence):
    html = render_markdown(f"{fence}\nx = 1\n```")
    assert "<script" not in html and "onclick" not in html and "evil" not in html
    for tag, attributes in parse(html):
        assert tag in {"pre", "code", "span"}, tag
        assert {name for name, _ in attributes} <= {"class", "data-lang"}, attributes


def test_spans_keep_only_the_classes_pygments_gives():
    html = render_markdown('```python\nx = "a"\n```')
    classes = {value for tag, attributes in parse(html) for name, value in attributes if name == "class"}
    assert classes and classes <= {"n", "o", "s2", "w", "p"}, classes


def test_empty_text_is_empty_html():
    assert render_markdown("") == ""


@pytest.mark.django_db
def test_the_message_serializer_gives_assistant_messages_their_html(alice):
    from conversations import services

    conversation = services.conversation_create(owner=alice)
    assistant = Message.objects.create(conversation=conversation, role="assistant", content="**hi** <script>x</script>")
    user = Message.objects.create(conversation=conversation, role="user", content="**hi**")
    data = MessageSerializer(assistant).data
    assert data["html"] == "<p><strong>hi</strong> &lt;script&gt;x&lt;/script&gt;</p>\n"
    assert data["content"] == "**hi** <script>x</script>"
    assert data["files"] == []
    assert MessageSerializer(user).data["html"] == ""
