"""A run's document as its reports read it, with what they derive from it derived once.

report.md, `run`'s output and its JUnit file each look at the run's tests over their trials and at
its failing tests, and report.md at where its semantic failures arose; a reading finds each once,
when first asked, so every output reads the same answer.
"""

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

    `derived_here`: the document's derived sections were computed from its results by this process
    (`RunDocument.with_derived`), so its stored stage attribution is the one to show. A document read
    back may have been written under older rules: its attribution is found again, as it always was."""

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
