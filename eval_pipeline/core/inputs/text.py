"""Text fields of input files.

A prompt or entity text that is only whitespace says nothing (an embedder would index an empty
string, a reranker would judge nothing); one of megabytes costs money on every call.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("is blank (empty or only whitespace)")
    return value


# A user message to the assistant; ample for a long chat turn or a BEIR query.
Prompt = Annotated[str, Field(min_length=1, max_length=10_000), AfterValidator(_not_blank)]
# An entity's title and one-line summary, shown to rerankers in every call.
Title = Annotated[str, Field(min_length=1, max_length=300), AfterValidator(_not_blank)]
Summary = Annotated[str, Field(min_length=1, max_length=2_000), AfterValidator(_not_blank)]
# Who made a human decision and why, recorded in the history.
Note = Annotated[str, Field(min_length=1, max_length=10_000), AfterValidator(_not_blank)]
# An entity's content: embedded and shown to calibrators; a book chapter, not a book.
Content = Annotated[str, Field(min_length=1, max_length=200_000), AfterValidator(_not_blank)]
