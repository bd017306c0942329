"""A run's document as its reports read it (report.md, `run`'s output, its JUnit file): its tests
over their trials, failing tests and stage attribution found once, when first asked, so every
output reads the same answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from eval_pipeline.core.report.failures import Failure, failing_tests
from eval_pipeline.core.scoring.metrics import StageAttribution, attributions
from eval_pipeline.core.scoring.run_document import GroupedResults, RunDocument, group_document


@dataclass(frozen=True)
class Reading:
    """`document`, its results grouped by test, and what the reports find in them.

    `derived_here`: this process derived the document's sections (`RunDocument.with_derived`), so
    its stored stage attribution is shown; one read back, maybe written under older rules, has its
    attribution found again."""

    document: RunDocument
    grouped: GroupedResults
    derived_here: bool = False

    @cached_property
    def failures(self) -> list[Failure]:
        """Every failing test, worst first (`failing_tests`)."""
        return failing_tests(self.document, self.grouped)

    @cached_property
    def stage_attribution(self) -> Sequence[StageAttribution]:
        doc = self.document
        return doc.stage_attribution if self.derived_here else attributions(doc.semantic, doc.candidate_depth)


def reading_of(doc: RunDocument, derived_here: bool = False) -> Reading:
    """`doc` with its results grouped here; `derived_here` as `Reading` says."""
    return Reading(doc, group_document(doc), derived_here)
