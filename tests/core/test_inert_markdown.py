"""Text from data inside markdown is inert (core/markdown_text.py): rendered by GitHub's
cmark-gfm with raw HTML allowed, it reads as exactly its characters, on one line, in prose, in
a code span and in a table cell, and makes no element, attribute, link, heading or mention."""

from __future__ import annotations

from html import unescape

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.core.control_chars import one_line
from eval_pipeline.core.markdown_text import WORD_JOINER, code, table, text
from tests.rendered_markdown import HOSTILE, injected, render

# Everything a payload may be made of: markdown's punctuation, whitespace and control characters.
_ALPHABET = st.sampled_from([*"\\`*_[]()<>&~|$!#@:.-+=/ \t\n\r\x00\x1b\u2028aZ9é", "www.", "http://"])
DATA = st.one_of(st.text(), st.lists(_ALPHABET).map("".join), st.sampled_from(HOSTILE))


def _rendered_text(html: str, start: str, end: str) -> str:
    return unescape(html.split(start, 1)[1].rsplit(end, 1)[0])


def _unjoined(value: str) -> str:
    """Prose puts a word joiner after an `@` (no mention): invisible, and left out here."""
    return value.replace(WORD_JOINER, "")


@settings(max_examples=400, deadline=None)
@given(DATA)
def test_prose_renders_as_its_characters_on_one_line(value: str) -> None:
    html = render(f"«{text(value)}»")
    assert _unjoined(_rendered_text(html, "<p>«", "»</p>")) == _unjoined(one_line(value))


@settings(max_examples=400, deadline=None)
@given(DATA)
def test_a_code_span_renders_as_its_characters_on_one_line(value: str) -> None:
    if not value:
        assert code(value) == ""
        return
    html = render(f"«{code(value)}»")
    assert _rendered_text(html, "<p>«<code>", "</code>»</p>") == one_line(value)


@settings(max_examples=300, deadline=None)
@given(DATA, DATA)
def test_table_cells_keep_their_text_and_the_row_its_columns(a: str, b: str) -> None:
    md = "\n".join(table(("A", "B", "C"), [(f"«{text(a)}»", f"«{code(b) or '·'}»", "end")]))
    html = render(md)
    cells = html.split("<tbody>")[1].split("<td>")[1:]
    assert len(cells) == 3 and cells[2].startswith("end</td>")
    assert _unjoined(_rendered_text(cells[0], "«", "»</td>")) == _unjoined(one_line(a))
    if b:
        assert _rendered_text(cells[1], "«<code>", "</code>»</td>") == one_line(b)


@pytest.mark.parametrize(
    "value",
    ["# h", "> q", "- a", "+ b", "* c", "1. item", "12) x", "---", "===", "___", "[x]: https://e.example"],
)
def test_prose_that_opens_a_line_starts_no_block(value: str) -> None:
    assert render(text(value)) == f"<p>{value.replace('>', '&gt;')}</p>\n"


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_text_makes_nothing_wherever_it_stands(value: str) -> None:
    for md in (
        f"{text(value)}",
        f"- {text(value)} — {code(value)}",
        f"### T-1: {text(value)}",
        f"<details><summary>kind</summary>\n\n- {code(value)} — {text(value)}\n</details>",
        "\n".join(table(("a", "b"), [(text(value), code(value))])),
    ):
        assert injected(md) == [], md


def test_the_checker_sees_what_raw_data_would_make() -> None:
    """The same payloads written raw make what `injected` looks for."""
    found = [problem for value in HOSTILE for problem in injected(f"- {value}")]
    for kind in ("element <img>", "element <script>", "element <svg>", "attribute", "<a> made by data"):
        assert any(p.startswith(kind) for p in found), kind
    for kind in ("<h1> made by data", "<em> made by data", "<del> made by data", "mention", "</details>"):
        assert any(kind in p for p in found), kind
    assert any(p.startswith("control character") for p in found)


def test_a_cut_never_ends_inside_a_code_span_or_an_escape() -> None:
    value = "`a`" * 50 + "<img src=x onerror=PWN()>" * 10
    for limit in range(1, 120):
        for rendered in (text(value, limit), code(value, limit)):
            assert len(rendered) <= max(limit, 4), (limit, rendered)
            assert injected(f"- {rendered}") == []
