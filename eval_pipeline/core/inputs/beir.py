"""Streaming readers of a BEIR folder: `corpus.jsonl`, `queries.jsonl`, `qrels/<split>.tsv`.

Each yields one record a line, so a corpus of any size is read in constant memory. Bad input
stops the read with one line naming the file, the line, the id where known and the field; ids
that TREC files could not carry (whitespace, control characters) are refused here, before
anything is written (external_ids.py says why).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.fileio import BadFile
from eval_pipeline.core.inputs.external_ids import carriage_problem
from eval_pipeline.core.inputs.file_reader import check_json_depth
from eval_pipeline.core.inputs.loading import Problem

CORPUS_FILE = "corpus.jsonl"
_SPLIT_MAX = 200  # bytes: `<split>.tsv` stays within a file name's 255
QUERIES_FILE = "queries.jsonl"
QRELS_DIR = "qrels"
# The one header row BEIR writes; any other first row is data (many qrels files have none).
QRELS_HEADER = ("query-id", "corpus-id", "score")
MAX_GAIN = 1000  # as the banks' `relevant` gains allow


class BeirError(BadInput):
    """Bad BEIR input: one line naming the file, the line, the id and the field where they apply."""

    def __init__(
        self, file: Path, message: str, line: int | None = None, item: str = "-", field: str = "-"
    ) -> None:
        super().__init__(str(Problem(str(file), item, field, message, line)))


@dataclass(frozen=True, slots=True)
class Record:
    """One line of corpus.jsonl or queries.jsonl (a query has no title)."""

    source_id: str
    title: str
    text: str
    line: int


@dataclass(frozen=True, slots=True)
class Judgment:
    query_id: str
    doc_id: str
    gain: int
    line: int


def split_problem(split: str) -> str | None:
    """Why `split` cannot name a qrels file (`qrels/<split>.tsv`), or None: one file name, never
    a path that could lead out of the BEIR folder."""
    if split in ("", ".", "..") or any(c in split for c in "/\\\0"):
        shown = split[:40]
        return f"'{shown}' is not a split name: one file name in qrels/ (such as test or dev), not a path"
    if len(split.encode()) > _SPLIT_MAX:
        return f"a split name has at most {_SPLIT_MAX} bytes (got {len(split.encode()):,})"
    return None


def qrels_path(src: Path, split: str) -> Path:
    problem = split_problem(split)
    if problem:
        raise BeirError(src / QRELS_DIR, problem)
    return src / QRELS_DIR / f"{split}.tsv"


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line, read lazily."""
    if not path.is_file():
        raise BeirError(path, "file not found" if not path.exists() else "not a regular file")
    number = 0
    try:
        with path.open(encoding="utf-8-sig") as handle:  # a leading BOM is not data
            for number, text in enumerate(handle, start=1):
                if text.strip():
                    yield number, text
    except UnicodeDecodeError:
        raise BeirError(path, "not UTF-8 text: save it as UTF-8", number + 1) from None
    except OSError as exc:
        raise BeirError(path, f"cannot read file: {exc.strerror or exc}") from None


def _objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, text in _lines(path):
        try:
            check_json_depth(text)
            value = json.loads(text)
        except BadFile as exc:
            raise BeirError(path, exc.message, number) from None
        except json.JSONDecodeError as exc:
            raise BeirError(path, f"not JSON ({exc.msg})", number) from None
        if not isinstance(value, dict):
            raise BeirError(path, "not a JSON object", number)
        yield number, value


def _records(path: Path, titled: bool) -> Iterator[Record]:
    for number, record in _objects(path):
        sid = record.get("_id")
        # Numeric ids are common in BEIR sets; a JSON number keeps its decimal spelling.
        if isinstance(sid, int) and not isinstance(sid, bool):
            sid = str(sid)
        if not isinstance(sid, str):
            raise BeirError(path, "missing, or not a string", number, field="_id")
        problem = carriage_problem(sid)
        if problem:
            raise BeirError(path, problem, number, field="_id")
        texts = []
        for key in ("title", "text") if titled else ("text",):
            value = record.get(key, "")
            if value is not None and not isinstance(value, str):
                raise BeirError(path, "not a string", number, sid, key)
            texts.append(value or "")
        yield Record(sid, texts[0] if titled else "", texts[-1], number)


def read_corpus(src: Path) -> Iterator[Record]:
    return _records(src / CORPUS_FILE, titled=True)


def read_queries(src: Path) -> Iterator[Record]:
    return _records(src / QUERIES_FILE, titled=False)


def _gain(path: Path, number: int, item: str, text: str) -> int:
    try:
        gain = int(text)
    except ValueError:
        raise BeirError(path, f"'{text}' is not a whole number", number, item, "score") from None
    if not 0 <= gain <= MAX_GAIN:
        raise BeirError(path, f"{gain} is outside 0..{MAX_GAIN}", number, item, "score")
    return gain


def read_qrels(src: Path, split: str) -> Iterator[Judgment]:
    """Judgments as written, gain 0 ("judged not relevant") included."""
    path = qrels_path(src, split)
    for index, (number, text) in enumerate(_lines(path)):
        row = text.rstrip("\r\n")
        # BEIR separates columns by tabs; a file without tabs is split on spaces.
        fields = row.split("\t") if "\t" in row else row.split()
        if index == 0 and tuple(fields) == QRELS_HEADER:
            continue
        if len(fields) != 3:
            raise BeirError(path, f"{len(fields)} columns, expected 3 (query-id corpus-id score)", number)
        query_id, doc_id, score = fields
        for name, value in (("query-id", query_id), ("corpus-id", doc_id)):
            problem = carriage_problem(value)
            if problem:
                raise BeirError(path, problem, number, field=name)
        yield Judgment(query_id, doc_id, _gain(path, number, query_id, score.strip()), number)
