"""A run's results grouped by test, once per run.

The aggregate, the failing tests, report.md, `run`'s output and its JUnit file all look at a test
as one unit over its trials; the route groups the rows once and hands this down, so each sees the
same grouping.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.scoring.results import AnyResult, SemanticResult
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.scoring.trials import TrialResults, by_test


@dataclass(frozen=True)
class GroupedResults:
    """Each bank's tests, in first-seen order, each with its rows in trial order."""

    threshold: int
    banks: Mapping[Mechanism, Sequence[TrialResults[AnyResult]]]

    def of(self, bank: Mechanism) -> Sequence[TrialResults[AnyResult]]:
        return self.banks[bank]

    @property
    def semantic(self) -> Sequence[TrialResults[SemanticResult]]:
        return cast(Sequence[TrialResults[SemanticResult]], self.banks[Mechanism.SEMANTIC])


def group_document(
    doc: RunDocument, semantic: Sequence[TrialResults[SemanticResult]] | None = None
) -> GroupedResults:
    """`doc`'s results by test; `semantic`: its semantic tests when the caller grouped them already."""
    threshold = doc.provenance.pass_threshold
    given = (
        {} if semantic is None else {Mechanism.SEMANTIC: cast(Sequence[TrialResults[AnyResult]], semantic)}
    )
    banks = {m: by_test(doc.results(m), threshold) for m in Mechanism if m not in given}
    return GroupedResults(threshold, {**given, **banks})
