"""Text fields of input files.

A prompt or entity text that is only whitespace says nothing (an embedder would index an empty
string, a reranker would judge nothing); one of megabytes costs money on every call.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

# A user message to the assistant; ample for a long chat turn or a BEIR query.
MAX_PROMPT_CHARS = 10_000
# An entity's title and one-line summary (shown to rerankers in every call).
MAX_TITLE_CHARS = 300
MAX_SUMMARY_CHARS = 2_000
# An entity's content: embedded and shown to calibrators; a book chapter, not a book.
MAX_CONTENT_CHARS = 200_000
# Who made a human decision and why, recorded in the history.
MAX_NOTE_CHARS = 10_000


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("is blank (empty or only whitespace)")
    return value


Prompt = Annotated[str, Field(min_length=1, max_length=MAX_PROMPT_CHARS), AfterValidator(_not_blank)]
Title = Annotated[str, Field(min_length=1, max_length=MAX_TITLE_CHARS), AfterValidator(_not_blank)]
Summary = Annotated[str, Field(min_length=1, max_length=MAX_SUMMARY_CHARS), AfterValidator(_not_blank)]
Note = Annotated[str, Field(min_length=1, max_length=MAX_NOTE_CHARS), AfterValidator(_not_blank)]
Content = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS), AfterValidator(_not_blank)]
