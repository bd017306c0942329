"""An evaluation's semantic results as TREC files: a run (`qid Q0 docid rank score tag`) and
qrels (`qid 0 docid gain`), in the ids of the collection the project was imported from.

The run holds each test's `final_ranking` from its first scored trial. A test with no scored
trial is in neither file: errored tests stay out of every average, and tools disagree on a judged
query missing from a run (trec_eval skips it, ir_measures counts 0). Scores fall strictly with the
rank, so no tool's tie-breaking can reorder a ranking. The qrels are the resolved expectations, at
the gains of core/scoring/metrics.py (`not_expected` is no judgment: unjudged is not relevant).
The rows have the fields of ir_measures' `ScoredDoc` and `Qrel`, which that library reads as they
are; writing the files needs no IR library.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import NamedTuple

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.inputs.external_ids import OriginalIds, carriage_problem
from eval_pipeline.core.mechanisms.retrieval import final_ranking
from eval_pipeline.core.scoring.metrics import judgments
from eval_pipeline.core.scoring.results import ResultStatus, SemanticResult

RUN_FILE = "run.trec"
QRELS_FILE = "qrels.trec"


class ScoredDoc(NamedTuple):
    """A run row."""

    query_id: str
    doc_id: str
    score: float


class Qrel(NamedTuple):
    """A qrels row: a judgment."""

    query_id: str
    doc_id: str
    relevance: int


class TrecIdError(BadInput):
    """An id that TREC files cannot carry (whitespace, control characters): one line naming it."""


def _carried(ids: OriginalIds, kind: str, ours: str) -> str:
    """The original id of a document or query (`kind`), refused when a TREC file cannot carry it."""
    original = ids.document(ours) if kind == "document" else ids.query(ours)
    problem = carriage_problem(original)
    if problem:
        raise TrecIdError(f"{kind} id of '{ours}': {problem}")
    return original


def ranked_results(results: Sequence[SemanticResult]) -> list[SemanticResult]:
    """Each test's first scored trial, tests in their first-seen order."""
    chosen: dict[str, SemanticResult] = {}
    for r in sorted(results, key=lambda r: r.trial):
        if r.status is ResultStatus.SCORED and r.test_id not in chosen:
            chosen[r.test_id] = r
    order = list(dict.fromkeys(r.test_id for r in results))
    return [chosen[t] for t in order if t in chosen]


def run_rows(results: Sequence[SemanticResult], ids: OriginalIds) -> list[ScoredDoc]:
    rows: list[ScoredDoc] = []
    for r in ranked_results(results):
        ranking = final_ranking(r.selections, r.candidates)
        qid = _carried(ids, "query", r.test_id)
        rows += [
            ScoredDoc(qid, _carried(ids, "document", e), float(len(ranking) - i))
            for i, e in enumerate(ranking)
        ]
    return rows


def qrel_rows(results: Sequence[SemanticResult], ids: OriginalIds) -> list[Qrel]:
    """The judgments of each test the run ranks."""
    rows: list[Qrel] = []
    for r in ranked_results(results):
        qid = _carried(ids, "query", r.test_id)
        rows += [
            Qrel(qid, _carried(ids, "document", e), gain) for e, gain in judgments(r.expectations).items()
        ]
    return rows


def run_text(rows: Sequence[ScoredDoc], tag: str) -> str:
    """The rows, ranked from 1 within each run of one query."""
    return "".join(
        f"{row.query_id} Q0 {row.doc_id} {rank} {row.score!r} {tag}\n"
        for _, ranked in groupby(rows, key=lambda row: row.query_id)
        for rank, row in enumerate(ranked, 1)
    )


def qrels_text(rows: Sequence[Qrel]) -> str:
    return "".join(f"{q.query_id} 0 {q.doc_id} {q.relevance}\n" for q in rows)
