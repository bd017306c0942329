"""Text from data (prompts, names, ids, reasons, the team's answers) made inert in every markdown
output: report.md, the diffs, the pull-request comment, the agreement report, Dagster metadata.

Every renderer passes data through `text` (prose, escaped) or `code` (a code span), so no HTML,
heading, link, image, emphasis, mention or `<details>` boundary can come from data, whatever
renders it (cmark-gfm with raw HTML included: tests/core/test_inert_markdown.py). Both keep the
text on one line, control characters escaped (`\\n`, `\\x1b`): a newline would start a block. Tables
escape their cells' pipes (`table`), so `text` and `code` may go anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from eval_pipeline.core.control_chars import one_line

ELLIPSIS = "…"
# Characters that start inline markup wherever they stand: backslash escapes, code spans,
# emphasis, raw HTML and autolinks, strikethrough, table cells, and the `$` of GitHub's math.
_ALWAYS = frozenset("\\`*<~|$")
# What starts a block where it opens a line: a heading, quote, link reference definition, list
# item or setext underline. Data never opens a line in our renderers; escaped anyway.
_LINE_START = re.compile(
    r"[#>\[]|[-+*=](?:\s|$)|\d{1,9}(?P<ordered>[.)])(?:\s|$)|(?P<rule>[-=])(?P=rule)*\s*$"
)
# Between `@` and a name, so no mention or e-mail autolink forms (U+2060 WORD JOINER, invisible).
WORD_JOINER = "\u2060"
# What cmark-gfm takes for an e-mail domain: any run of word characters, dots and hyphens that
# holds a dot (even first: `a@.b` is linked).
_EMAIL_DOMAIN = re.compile(r"[\w.-]*\.")


def _flat(value: object) -> str:
    return one_line(str(value))


def _cut(flat: str, keep: int) -> str:
    return flat if keep >= len(flat) else flat[: max(keep, 0)] + ELLIPSIS


def _intraword(flat: str, i: int) -> bool:
    """An underscore between two letters or digits cannot open or close emphasis."""
    return 0 < i < len(flat) - 1 and flat[i - 1].isalnum() and flat[i + 1].isalnum()


def _mention(flat: str, i: int) -> bool:
    """GitHub mentions an `@name` that does not follow a letter, digit or underscore."""
    return i == 0 or not (flat[i - 1].isalnum() or flat[i - 1] == "_")


def _opens(ch: str, after: str) -> bool:
    """The characters that start markup only before certain others: a link or image needs `](`
    or `][` (no reference is ever defined: a definition opens a line), a footnote `[^`, an
    entity `&name;` or `&#…;`."""
    return (
        (ch == "]" and after in ("(", "["))
        or (ch == "[" and after == "^")
        or (ch == "&" and (after == "#" or after.isalnum()))
    )


def _escaped(flat: str, i: int) -> str:
    ch = flat[i]
    if ch in _ALWAYS or (ch == "_" and not _intraword(flat, i)):
        return "\\" + ch
    if _opens(ch, flat[i + 1 : i + 2]):
        return "\\" + ch
    if ch == "@" and (_mention(flat, i) or _EMAIL_DOMAIN.match(flat, i + 1)):
        return ch + WORD_JOINER
    # The autolinks of GitHub's extension start at `scheme://` and at `www.`.
    if ch == ":" and flat.startswith("//", i + 1):
        return "\\:"
    if ch == "." and flat[max(i - 3, 0) : i].lower() == "www":
        return "\\."
    return ch


def _text(flat: str) -> str:
    escaped = [_escaped(flat, i) for i in range(len(flat))]
    opening = _LINE_START.match(flat)
    if opening is not None:
        at = opening.start("ordered") if opening.group("ordered") else 0
        if not escaped[at].startswith("\\"):
            escaped[at] = "\\" + escaped[at]
    return "".join(escaped)


def _code(flat: str) -> str:
    if not flat:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    # A span's content loses one space at each end when it has one at both (and is not all spaces).
    edges = flat.startswith(("`", " ")) or flat.endswith(("`", " "))
    pad = " " if edges and not flat.isspace() else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _within(render: Callable[[str], str], value: object, limit: int | None) -> str:
    """`render` of `value` on one line; with `limit`, of as much of it as keeps the markdown
    within `limit` characters (cut before rendering: no cut ends a code span or an escape)."""
    flat = _flat(value)
    out = render(flat)
    keep = len(flat)
    while limit is not None and len(out) > limit and keep > 0:
        keep = min(keep - 1, keep - (len(out) - limit))
        out = render(_cut(flat, keep))
    return out


def text(value: object, limit: int | None = None) -> str:
    """`value` as markdown prose that renders as exactly its characters, on one line (at most
    `limit` characters of markdown, cut with `…`)."""
    return _within(_text, value, limit)


def code(value: object, limit: int | None = None) -> str:
    """`value` as a code span, on one line (at most `limit` characters of markdown, cut with `…`):
    its fence is longer than any run of backticks inside, padded where the text begins or ends
    with a backtick or a space."""
    return _within(_code, value, limit)


def _cell(value: object) -> str:
    # GitHub's table extension splits a row at every pipe not preceded by a backslash, and
    # removes that backslash before the cell is parsed: in a code span too.
    return str(value).replace("|", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A GFM table; its cells are markdown already (our words, or data through `text`/`code`)."""
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]
