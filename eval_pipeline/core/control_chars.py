"""Control characters shown escaped, in error lines and on the console: a newline in an id must
not split an error line, and nothing a command prints (`console_text`, applied by the CLI to
stdout and stderr) may clear the screen, move the cursor, retitle the window or reverse the
text's direction. Imports nothing heavy: the CLI's streams use it before any command loads.
"""

from __future__ import annotations

import re

# C0 and C1 controls, the line and paragraph separators, and the bidirectional overrides and
# isolates (which reorder what a reader sees).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    return repr(match.group(0))[1:-1]


def one_line(text: str) -> str:
    """`text` with control characters (newlines included) escaped, e.g. `\\n`, `\\x1b`."""
    return _CONTROL.sub(_shown, text)


def visible(text: str) -> str:
    """`text` with its newlines kept and every other control character shown escaped as
    `one_line` shows it: what a file may hold (the HTML report's text, for one)."""
    return "\n".join(one_line(line) for line in text.split("\n"))


def console_text(text: str) -> str:
    """`text` as it may reach a terminal: `visible`, and a carriage return kept where it begins
    the text (a progress line redrawing itself)."""
    head = "\r" if text.startswith("\r") else ""
    return head + visible(text[len(head) :])
