"""A run's results grouped by test, once per run.

The aggregate, the failing tests, report.md, `run`'s output and its JUnit file all look at a test
as one unit over its trials; the route groups the rows once and hands this down, so each sees the
same grouping.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.scoring.results import (
    AlwaysResult,
    AnyResult,
    PatternResult,
    SemanticResult,
    StateResult,
)
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.scoring.trials import TrialResults, by_test


@dataclass(frozen=True)
class GroupedResults:
    """Each bank's tests, in first-seen order, each with its rows in trial order."""

    threshold: int
    semantic: Sequence[TrialResults[SemanticResult]]
    state: Sequence[TrialResults[StateResult]]
    pattern: Sequence[TrialResults[PatternResult]]
    always: Sequence[TrialResults[AlwaysResult]]

    def of(self, bank: Mechanism) -> Sequence[TrialResults[AnyResult]]:
        banks: dict[Mechanism, Sequence[TrialResults[AnyResult]]] = {
            Mechanism.SEMANTIC: self.semantic,
            Mechanism.STATE: self.state,
            Mechanism.PATTERN: self.pattern,
            Mechanism.ALWAYS: self.always,
        }
        return banks[bank]


def group_document(
    doc: RunDocument, semantic: Sequence[TrialResults[SemanticResult]] | None = None
) -> GroupedResults:
    """`doc`'s results by test; `semantic`: its semantic tests when the caller grouped them already."""
    threshold = doc.provenance.pass_threshold
    return GroupedResults(
        threshold=threshold,
        semantic=by_test(doc.semantic, threshold) if semantic is None else semantic,
        state=by_test(doc.state, threshold),
        pattern=by_test(doc.pattern, threshold),
        always=by_test(doc.always, threshold),
    )
