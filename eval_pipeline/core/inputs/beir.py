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
from eval_pipeline.core.inputs.loading import Problem
from eval_pipeline.core.inputs.nesting import check_json_depth

CORPUS_FILE = "corpus.jsonl"
_SPLIT_MAX = 200  # bytes: `<split>.tsv` stays within a file name's 255
QUERIES_FILE = "queries.jsonl"
QRELS_DIR = "qrels"
# The one header row BEIR writes; any other first row is data (many qrels files have none).
QRELS_HEADER = ("query-id", "corpus-id", "score")
MAX_GAIN = 1000  # as the banks' `relevant` gains allow


class BeirError(BadInput):
    """Bad BEIR input: one line naming the file, the line, the id and the field where they apply."""

    def __init__(self, file: Path, line: int | None, item: str, field: str, message: str) -> None:
        super().__init__(str(Problem(str(file), item, field, message, line)))


@dataclass(frozen=True, slots=True)
class Document:
    source_id: str
    title: str
    text: str
    line: int


@dataclass(frozen=True, slots=True)
class Query:
    source_id: str
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
        raise BeirError(src / QRELS_DIR, None, "-", "-", problem)
    return src / QRELS_DIR / f"{split}.tsv"


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line, read lazily."""
    if not path.is_file():
        raise BeirError(path, None, "-", "-", "file not found" if not path.exists() else "not a regular file")
    number = 0
    try:
        with path.open(encoding="utf-8-sig") as handle:  # a leading BOM is not data
            for number, text in enumerate(handle, start=1):
                if text.strip():
                    yield number, text
    except UnicodeDecodeError:
        raise BeirError(path, number + 1, "-", "-", "not UTF-8 text: save it as UTF-8") from None
    except OSError as exc:
        raise BeirError(path, None, "-", "-", f"cannot read file: {exc.strerror or exc}") from None


def _objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, text in _lines(path):
        try:
            check_json_depth(text)
            value = json.loads(text)
        except BadFile as exc:
            raise BeirError(path, number, "-", "-", exc.message) from None
        except json.JSONDecodeError as exc:
            raise BeirError(path, number, "-", "-", f"not JSON ({exc.msg})") from None
        if not isinstance(value, dict):
            raise BeirError(path, number, "-", "-", "not a JSON object")
        yield number, value


def _source_id(path: Path, number: int, record: dict[str, Any]) -> str:
    value = record.get("_id")
    # Numeric ids are common in BEIR sets; a JSON number keeps its decimal spelling.
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise BeirError(path, number, "-", "_id", "missing, or not a string")
    problem = carriage_problem(value)
    if problem:
        raise BeirError(path, number, "-", "_id", problem)
    return value


def _text(path: Path, number: int, item: str, record: dict[str, Any], key: str) -> str:
    value = record.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BeirError(path, number, item, key, "not a string")
    return value


def read_corpus(src: Path) -> Iterator[Document]:
    path = src / CORPUS_FILE
    for number, record in _objects(path):
        sid = _source_id(path, number, record)
        title = _text(path, number, sid, record, "title")
        yield Document(sid, title, _text(path, number, sid, record, "text"), number)


def read_queries(src: Path) -> Iterator[Query]:
    path = src / QUERIES_FILE
    for number, record in _objects(path):
        sid = _source_id(path, number, record)
        yield Query(sid, _text(path, number, sid, record, "text"), number)


def _gain(path: Path, number: int, item: str, text: str) -> int:
    try:
        gain = int(text)
    except ValueError:
        raise BeirError(path, number, item, "score", f"'{text}' is not a whole number") from None
    if not 0 <= gain <= MAX_GAIN:
        raise BeirError(path, number, item, "score", f"{gain} is outside 0..{MAX_GAIN}")
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
            raise BeirError(
                path, number, "-", "-", f"{len(fields)} columns, expected 3 (query-id corpus-id score)"
            )
        query_id, doc_id, score = fields
        for name, value in (("query-id", query_id), ("corpus-id", doc_id)):
            problem = carriage_problem(value)
            if problem:
                raise BeirError(path, number, "-", name, problem)
        yield Judgment(query_id, doc_id, _gain(path, number, query_id, score.strip()), number)
