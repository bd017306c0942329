"""UI metadata stays small whatever the run's size: a long markdown report is cut at a line and
names the file that holds all of it."""

from __future__ import annotations

from eval_pipeline.defs.metadata import MAX_MARKDOWN_CHARS, markdown_metadata


def test_short_markdown_is_shown_whole() -> None:
    assert markdown_metadata("# report\n| a |", "results/r.md").value == "# report\n| a |"


def test_long_markdown_is_cut_at_a_line_and_names_the_whole() -> None:
    line = "| T-0001 | scored | 90 | minor issue |\n"
    text = line * (MAX_MARKDOWN_CHARS // len(line) + 50)
    whole = "results/m/2026-11-20/report.md"
    shown = markdown_metadata(text, whole).value
    body, note = shown.rsplit("\n\n", 1)
    assert len(body) <= MAX_MARKDOWN_CHARS and body.endswith("minor issue |")
    assert text.startswith(body)
    assert note == f"*… cut at {MAX_MARKDOWN_CHARS:,} characters: the whole is {whole}*"
