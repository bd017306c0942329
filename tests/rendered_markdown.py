"""Markdown as GitHub renders it (cmark-gfm, through `cmarkgfm`), and what in the HTML could
only have come from data: an element or attribute we never write, a link we never made, a
heading, emphasis or link opened by a payload, an `@mention`, an unbalanced `<details>` fold.

The extensions are GitHub's (tables, autolinks, strikethrough, task lists) with raw HTML passed
through (CMARK_OPT_UNSAFE); GitHub's `tagfilter` extension is left out on purpose: it would hide
a `<script>` or `<iframe>` that our escaping let through.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from html.parser import HTMLParser

import cmarkgfm
from cmarkgfm.cmark import Options

EXTENSIONS = ["table", "autolink", "strikethrough", "tasklist"]
# The elements our markdown makes (headings, lists, tables, emphasis, code, the comment's folds).
OURS = {"h1", "h2", "h3", "h4", "p", "ul", "ol", "li", "table", "thead", "tbody", "tr", "th", "td"}
OURS |= {"strong", "em", "code", "details", "summary", "a"}
# Markup a payload opens puts this marker first inside the element it would make.
MARKER = "PWN"
# The payloads of issue 42 and our own: each opens its markup right before the marker.
HOSTILE = [
    "x\n</details>\n\n# PWN heading\n@everyone <img src=https://evil.example/PWN.png>",
    "[PWN](javascript:alert(1))",
    "![PWN](https://evil.example/pixel.png)",
    "<script>PWN()</script>",
    '"><svg onload=PWN()>',
    "<img src=x onerror=PWN()>",
    "\x1b[2J\x1b[HPWN clears the screen\x07",
    "\n# PWN\n",
    "PWN\n===",
    "*PWN* **PWN** _PWN_ __PWN__ ~~PWN~~",
    "`PWN` ``PWN`` a ` b",
    "| PWN | cell |\n|---|---|",
    "<https://evil.example/PWN>",
    "https://evil.example/PWN www.evil.example/PWN",
    "mail PWN@evil.example or @everyone or @org/team",
    "[PWN][ref]\n\n[ref]: https://evil.example",
    "&lt;img src=x onerror=PWN()&gt; &#60;b&#62;",
    "- [ ] PWN\n1. PWN\n> PWN",
    "$PWN$ and $$PWN$$",
    "\\<b>PWN</b>\\",
    "[^PWN]\n\n[^PWN]: https://evil.example",
    "\u202eevil\u2028PWN\u2029line\r\x9b31m CSI",
]

_INLINE = {"a", "em", "strong", "del", "summary", "h1", "h2", "h3", "h4", "h5", "h6"}
_MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9]")


def render(markdown: str) -> str:
    html: str = cmarkgfm.markdown_to_html_with_extensions(
        markdown, options=Options.CMARK_OPT_UNSAFE, extensions=EXTENSIONS
    )
    return html


@dataclass
class _Element:
    tag: str
    text: list[str] = field(default_factory=list)


class _Reader(HTMLParser):
    def __init__(self, links: Collection[str]) -> None:
        super().__init__(convert_charrefs=True)
        self.links = links
        self.open: list[_Element] = []
        self.found: list[str] = []
        self.details = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in OURS:
            self.found.append(f"element <{tag}> {attrs}")
        for name, value in attrs:
            if not (tag == "a" and name == "href" and value in self.links):
                self.found.append(f"attribute {name}={value!r} on <{tag}>")
        self.details += tag == "details"
        self.open.append(_Element(tag))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self.details -= 1
            if self.details < 0:
                self.found.append("a </details> closes a fold it did not open")
        while self.open:
            element = self.open.pop()
            whole = "".join(element.text).strip()
            if element.tag in _INLINE and whole.startswith(MARKER):
                self.found.append(f"<{element.tag}> made by data: {whole[:60]!r}")
            if self.open:
                self.open[-1].text.append("".join(element.text))
            if element.tag == tag:
                return

    def handle_data(self, data: str) -> None:
        inside = {e.tag for e in self.open}
        if not inside & {"code", "a", "pre"}:
            for m in _MENTION.finditer(data):
                self.found.append(f"mention {data[m.start() : m.start() + 20]!r}")
        if self.open:
            self.open[-1].text.append(data)


def injected(markdown: str, links: Collection[str] = ()) -> list[str]:
    """What the rendered `markdown` holds that came from data; `links`: the hrefs we write."""
    found = [f"control character {c!r}" for c in set(re.findall(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]", markdown))]
    reader = _Reader(links)
    reader.feed(render(markdown))
    reader.close()
    if reader.details:
        found.append(f"{reader.details} <details> fold(s) left open")
    return found + reader.found
