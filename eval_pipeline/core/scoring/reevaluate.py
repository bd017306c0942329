"""Re-evaluate a chosen set of semantic tests into an existing evaluation: the one function both
`run --retry-errored` and the noise confirmation of regressions go through.

Rows of the same test and trial are replaced (a retried errored trial); rows of new trials are
added (re-trials of a regressed test). The aggregate and the derived metrics are recomputed from
the merged rows, and the re-evaluation is recorded in the provenance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.expectations.resolution import ResolvedExpectation
from eval_pipeline.core.inputs.banks import Mechanism, SemanticTest
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.scoring.aggregate import aggregate
from eval_pipeline.core.scoring.evaluation import score_semantic
from eval_pipeline.core.scoring.reevaluation import Reevaluation, StoredReevaluation, Why
from eval_pipeline.core.scoring.results import SemanticResult
from eval_pipeline.core.scoring.run_document import RunDocument


class ReevaluationError(BadInput, ValueError):
    """A re-evaluation that does not fit the document (it ran no semantic bank)."""


def record_of(
    why: Why, at: datetime, retrievals: Sequence[SemanticRetrieval], base: str | None = None
) -> Reevaluation:
    """What re-evaluating `retrievals` was, and what it cost (every call, errored ones too)."""
    return Reevaluation(
        why=why,
        at=at,
        test_ids=sorted({r.test_id for r in retrievals}),
        trials=sorted({r.trial for r in retrievals}),
        api_calls=sum(r.api_calls for r in retrievals),
        cost_usd=round(sum(r.cost_usd for r in retrievals), 6),
        base=base,
    )


def retry_of(at: datetime, retrievals: Sequence[SemanticRetrieval]) -> StoredReevaluation:
    """Errored trials evaluated again, ready to merge (`reevaluate`)."""
    return StoredReevaluation(
        record=record_of(Why.RETRY_ERRORED, at, retrievals), retrievals=list(retrievals)
    )


def _merged(rows: Sequence[SemanticResult], new: Sequence[SemanticResult]) -> list[SemanticResult]:
    """`rows` with each (test, trial) of `new` replaced or added; tests keep their order."""
    replaced = {(r.test_id, r.trial) for r in new}
    kept = [r for r in rows if (r.test_id, r.trial) not in replaced]
    order = {tid: i for i, tid in enumerate(dict.fromkeys(r.test_id for r in [*rows, *new]))}
    return sorted([*kept, *new], key=lambda r: (order[r.test_id], r.trial))


def reevaluate(
    doc: RunDocument,
    tests: Sequence[SemanticTest],
    resolved: Mapping[str, ResolvedExpectation],
    stored: StoredReevaluation,
) -> RunDocument:
    """`doc` with `stored`'s retrievals scored against `resolved` and merged in, its aggregate
    and derived metrics recomputed, and `stored.record` appended to its provenance."""
    banks = doc.aggregate.banks
    if Mechanism.SEMANTIC not in banks:
        raise ReevaluationError(f"{doc.provenance.model}@{doc.provenance.date}: no semantic bank ran")
    semantic = _merged(doc.semantic, score_semantic(tests, resolved, stored.retrievals))
    agg = aggregate(
        semantic=semantic,
        state=doc.state if Mechanism.STATE in banks else None,
        pattern=doc.pattern if Mechanism.PATTERN in banks else None,
        always=doc.always if Mechanism.ALWAYS in banks else None,
        threshold=doc.provenance.pass_threshold,
        implementations=doc.aggregate.implementations,
    )
    history = [*doc.provenance.reevaluations, stored.record]
    return doc.model_copy(
        update={
            "provenance": doc.provenance.model_copy(update={"reevaluations": history}),
            "aggregate": agg,
            "semantic": semantic,
        }
    ).with_derived()


def reevaluate_all(
    doc: RunDocument,
    tests: Sequence[SemanticTest],
    resolved: Mapping[str, ResolvedExpectation],
    stored: Sequence[StoredReevaluation],
) -> RunDocument:
    """Every stored re-evaluation of a run, in the order they were made."""
    for one in stored:
        doc = reevaluate(doc, tests, resolved, one)
    return doc


def errored_tests(doc: RunDocument) -> dict[str, list[int]]:
    """The errored semantic trials of `doc`, per test: what `--retry-errored` calls again."""
    out: dict[str, list[int]] = {}
    for r in doc.semantic:
        if r.score is None:
            out.setdefault(r.test_id, []).append(r.trial)
    return out
