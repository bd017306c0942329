"""Re-evaluate a chosen set of tests into an existing evaluation: the one function both
`run --retry-errored` and the noise confirmation of regressions go through.

Rows of the same test and trial are replaced (a retried errored test); rows of new trials are
added (re-trials of a regressed test). Everything is scored like the day's, the aggregate and the
derived metrics recomputed from the merged rows, and the re-evaluation recorded in the provenance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TypeVar

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.expectations.resolution import ResolvedExpectation
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.scoring.aggregate import REFERENCE, aggregate
from eval_pipeline.core.scoring.evaluation import MechanismOutput, score_semantic
from eval_pipeline.core.scoring.implementations import score_system
from eval_pipeline.core.scoring.reevaluation import Reevaluation, StoredReevaluation, Why
from eval_pipeline.core.scoring.registry import DETERMINISTIC
from eval_pipeline.core.scoring.results import AnyResult, ResultBase
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.scoring.trials import trial_of

R = TypeVar("R", bound=ResultBase)


class ReevaluationError(BadInput, ValueError):
    """A re-evaluation that does not fit the document (a bank it did not run, or answers of the
    team's system for a bank the built-in mechanism produced)."""


def record_of(
    why: Why,
    at: datetime,
    retrievals: Sequence[SemanticRetrieval],
    base: str | None = None,
    system_outputs: Sequence[MechanismOutput] = (),
) -> Reevaluation:
    """What re-evaluating was, and what it cost (every call, errored ones too; one call per
    answer of the team's system)."""
    banks: dict[Mechanism, list[str]] = {}
    if retrievals:
        banks[Mechanism.SEMANTIC] = sorted({r.test_id for r in retrievals})
    for o in system_outputs:
        banks.setdefault(_mechanism(o), []).append(o.test_id)
    return Reevaluation(
        why=why,
        at=at,
        test_ids=sorted({tid for ids in banks.values() for tid in ids}),
        trials=sorted({r.trial for r in retrievals}),
        banks={m: sorted(banks[m]) for m in Mechanism if m in banks},
        api_calls=sum(r.api_calls for r in retrievals) + len(system_outputs),
        cost_usd=round(sum(r.cost_usd for r in retrievals), 6),
        base=base,
    )


def retry_of(
    at: datetime,
    retrievals: Sequence[SemanticRetrieval],
    system_outputs: Sequence[MechanismOutput] = (),
) -> StoredReevaluation:
    """Errored tests evaluated again (semantic trials, and the team's system's answers for
    state, pattern and always tests), ready to merge (`reevaluate`)."""
    return StoredReevaluation(
        record=record_of(Why.RETRY_ERRORED, at, retrievals, system_outputs=system_outputs),
        retrievals=list(retrievals),
        system_outputs=list(system_outputs),
    )


def _mechanism(output: MechanismOutput) -> Mechanism:
    if output.mechanism is None or output.mechanism is Mechanism.SEMANTIC:
        raise ReevaluationError(f"{output.test_id}: a stored answer of the team's system names no bank")
    return output.mechanism


def _key(r: ResultBase) -> tuple[str, int]:
    return (r.test_id, trial_of(r))


def _merged(rows: Sequence[R], new: Sequence[R]) -> list[R]:
    """`rows` with each (test, trial) of `new` replaced or added; tests keep their order."""
    replaced = {_key(r) for r in new}
    kept = [r for r in rows if _key(r) not in replaced]
    order = {tid: i for i, tid in enumerate(dict.fromkeys(r.test_id for r in [*rows, *new]))}
    return sorted([*kept, *new], key=lambda r: (order[r.test_id], _key(r)[1]))


def _check_fits(doc: RunDocument, stored: StoredReevaluation) -> None:
    """Refuse what the document cannot take: rows for a bank it did not run, or system answers
    for a bank its evaluation took from the built-in mechanism."""
    made_by = doc.aggregate.implementations
    touched = {_mechanism(o) for o in stored.system_outputs}
    touched |= {Mechanism.SEMANTIC} if stored.retrievals else set()
    label = f"{doc.provenance.model}@{doc.provenance.date}"
    for mechanism in sorted(touched, key=list(Mechanism).index):
        if mechanism not in doc.aggregate.banks:
            raise ReevaluationError(f"{label}: no {mechanism.value} bank ran")
        if mechanism is not Mechanism.SEMANTIC and made_by.get(mechanism, REFERENCE) == REFERENCE:
            raise ReevaluationError(f"{label}: its {mechanism.value} bank is not the team's system's")


def reevaluate(
    doc: RunDocument,
    banks: Banks,
    resolved: Mapping[str, ResolvedExpectation],
    stored: StoredReevaluation,
) -> RunDocument:
    """`doc` with `stored`'s retrievals and system answers scored (semantic against `resolved`)
    and merged in, its aggregate and derived metrics recomputed, and `stored.record` appended to
    its provenance."""
    _check_fits(doc, stored)
    system = score_system(banks, doc.aggregate.implementations, stored.system_outputs)
    new: dict[Mechanism, Sequence[AnyResult]] = {
        Mechanism.SEMANTIC: score_semantic(banks.semantic_tests, resolved, stored.retrievals),
        **system.results,
    }
    merged = {m: _merged(doc.results(m), new.get(m, [])) for m in Mechanism}
    agg = aggregate(
        {m: rows for m, rows in merged.items() if m in doc.aggregate.banks},
        threshold=doc.provenance.pass_threshold,
        implementations=doc.aggregate.implementations,
    )
    history = [*doc.provenance.reevaluations, stored.record]
    return doc.model_copy(
        update={
            "provenance": doc.provenance.model_copy(update={"reevaluations": history}),
            "aggregate": agg,
            **{m.value: rows for m, rows in merged.items()},
        }
    ).with_derived()


def reevaluate_all(
    doc: RunDocument,
    banks: Banks,
    resolved: Mapping[str, ResolvedExpectation],
    stored: Sequence[StoredReevaluation],
) -> RunDocument:
    """Every stored re-evaluation of a run, in the order they were made."""
    for one in stored:
        doc = reevaluate(doc, banks, resolved, one)
    return doc


def errored_tests(doc: RunDocument) -> dict[str, list[int]]:
    """The errored semantic trials of `doc`, per test: what `--retry-errored` calls again."""
    out: dict[str, list[int]] = {}
    for r in doc.semantic:
        if r.score is None:
            out.setdefault(r.test_id, []).append(r.trial)
    return out


def errored_answers(doc: RunDocument, *, system: bool) -> dict[Mechanism, list[str]]:
    """The errored state, pattern and always tests of `doc`, per bank, of the banks the team's
    system answered (`system=True`: what `--retry-errored` calls again) or of those the built-in
    mechanisms produced (deterministic and in-process: evaluating again gives the same result)."""
    made_by = doc.aggregate.implementations
    out: dict[Mechanism, list[str]] = {}
    for d in DETERMINISTIC:
        errored = [r.test_id for r in doc.results(d.mechanism) if r.score is None]
        if errored and (made_by.get(d.mechanism, REFERENCE) != REFERENCE) is system:
            out[d.mechanism] = errored
    return out
