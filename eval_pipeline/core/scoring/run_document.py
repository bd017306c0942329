"""The results document written for every run: every test in full, plus where it came from.

`results/<model>/<date>/results.json` holds one of these. The schema is versioned; diffs
refuse to compare documents across major versions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.expectations.resolution import ExpectationConflict
from eval_pipeline.core.fileio import TextFile, parse_json_model, read_json_model
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.external_ids import OriginalIds
from eval_pipeline.core.inputs.identity import EvaluationIdentity
from eval_pipeline.core.inputs.stage_depths import CANDIDATE_K
from eval_pipeline.core.scoring.aggregate import Aggregate
from eval_pipeline.core.scoring.metrics import (
    PerTestMetrics,
    StageAttribution,
    attributions,
    run_metrics,
)
from eval_pipeline.core.scoring.reevaluation import Reevaluation
from eval_pipeline.core.scoring.results import (
    RESULT_SCHEMA_VERSION,
    AlwaysResult,
    AnyResult,
    PatternResult,
    SemanticResult,
    StateResult,
)
from eval_pipeline.core.scoring.trials import TrialResults, by_test
from eval_pipeline.core.sparse_json import SparseModel


class Provenance(SparseModel):
    """Everything a result depends on, so any past evaluation can be explained and reproduced."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)
    omitted_at_default = ("original_ids",)

    schema_version: str = RESULT_SCHEMA_VERSION
    generated_at: datetime
    code_version: str | None = Field(
        default=None, description="The package source and dependency versions that made it (1.5+)"
    )
    date: str = Field(description="The evaluation date partition (UTC)")
    model: str
    system_config: dict[str, Any] = Field(description="The model entry from the models file")
    kb_version: str
    kb_hash: str
    bank_hashes: dict[str, str]
    history_hash: str
    inputs_snapshot: str | None = Field(
        default=None, description="The KB and banks snapshot evaluated, and how it was chosen"
    )
    pass_threshold: int
    scope: dict[str, Any] = Field(default_factory=dict, description="Banks, tests, topic filters")
    calibration_cost_usd: float = Field(
        default=0.0, description="Calibration spend on this date: never part of the system's cost"
    )
    rerank_mode: Literal["online", "batch"] = Field(
        default="online", description="batch: a Claude reranker answered through Message Batches"
    )
    prompt_cache: str | None = Field(
        default=None,
        description="Whether the reranker's stable prefix reached the model's minimum cacheable length",
    )
    identity: EvaluationIdentity | None = Field(
        default=None, description="The project, KB, banks and mechanism sources evaluated (1.6+)"
    )
    reevaluations: list[Reevaluation] = Field(
        default_factory=list,
        description="Tests evaluated again after the day's evaluation, and why (1.7+)",
    )
    original_ids: OriginalIds | None = Field(
        default=None,
        description="An imported collection's ids of the semantic tests and the entities they judge (1.11+)",
    )


class RunDocument(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    provenance: Provenance
    aggregate: Aggregate
    semantic: list[SemanticResult] = Field(default_factory=list)
    state: list[StateResult] = Field(default_factory=list)
    pattern: list[PatternResult] = Field(default_factory=list)
    always: list[AlwaysResult] = Field(default_factory=list)
    expectation_conflicts: list[ExpectationConflict] = Field(default_factory=list)
    retrieval_metrics: list[PerTestMetrics] = Field(
        default_factory=list,
        description="nDCG@6, recall@6, MRR and candidate recall@15 per scored test",
    )
    stage_attribution: list[StageAttribution] = Field(
        default_factory=list,
        description="Where each semantic hard fail (or graded test with nothing relevant selected) arose: "
        "embedding, reranker or error",
    )
    ir_metrics: dict[str, float] | None = Field(
        default=None,
        description="nDCG@10, recall@100 and MRR@10 over the judged semantic tests, on their final "
        "rankings (trec_eval conventions; 1.9+); a cutoff deeper than the candidate depth that cut the "
        "rankings is named at that depth (recall@15)",
    )

    def results(self, mechanism: Mechanism) -> list[AnyResult]:
        """The rows of `mechanism`'s bank (each bank's list is named for its mechanism)."""
        rows: list[AnyResult] = getattr(self, mechanism.value)
        return rows

    def all_results(self) -> list[AnyResult]:
        return [r for m in Mechanism for r in self.results(m)]

    def with_derived(self) -> RunDocument:
        """This document with its derived sections (metrics, attribution) computed from its results."""
        per_trial, standard = run_metrics(self.semantic, self.candidate_depth)
        return self.model_copy(
            update={
                "retrieval_metrics": per_trial,
                "stage_attribution": attributions(self.semantic, self.candidate_depth),
                "ir_metrics": standard,
            }
        )

    def metrics(self) -> list[PerTestMetrics]:
        """The stored per-test metrics; computed only for a document written without them."""
        return self.retrieval_metrics or run_metrics(self.semantic)[0]

    @property
    def candidate_depth(self) -> int:
        """How many candidates the model's embedding stage kept (models.yaml `candidate_depth`)."""
        return int(self.provenance.system_config.get("candidate_depth", CANDIDATE_K))

    def standard_metrics(self) -> dict[str, float] | None:
        """The stored standard cutoffs; computed for a document written before they were (< 1.9)."""
        if self.ir_metrics is not None:
            return self.ir_metrics
        return run_metrics(self.semantic, self.candidate_depth)[1]


@dataclass(frozen=True)
class GroupedResults:
    """A run's results grouped by test, once per run: each bank's tests in first-seen order, each
    with its rows in trial order. The aggregate, the failing tests, report.md, `run`'s output and
    its JUnit file all see a test as one unit over its trials, and the same grouping."""

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


RESULTS_FILE = "results.json"
REPORT_FILE = "report.md"
REPORT_HTML_FILE = "report.html"  # written with the regression diff (full runs)
GATE_FILE = "gate.json"
# Tests evaluated again into the run (retries, re-trials), re-applied whenever its report is rebuilt.
REEVALUATIONS_FILE = "reevaluations.json"
# Written beside the run by the diff assets (markdown twins share the stem).
REGRESSION_DIFF_FILE = "regression_diff.json"
COMPARISON_FILE = "model_comparison.json"
COMPARISON_DIR = "_comparison"  # results/_comparison/<date>/: the date's comparison of every model
# Narrowed runs write under results/_scoped/<scope>/: never a model folder, so never a baseline.
SCOPED_DIR = "_scoped"


class DocumentError(BadInput, ValueError):
    """A results document that cannot be read or does not validate: one line naming the file."""


def read_document(path: TextFile) -> RunDocument:
    return read_json_model(path, RunDocument, DocumentError, "results document")


def parse_document(text: str, source: object) -> RunDocument:
    """A results document whose text the caller has read (and hashed, say) already."""
    return parse_json_model(text, source, RunDocument, DocumentError, "results document")


def model_dirs(results_dir: Path) -> list[Path]:
    """One folder per model under `results_dir` (`_comparison` and other `_` folders are not models)."""
    return sorted(p for p in results_dir.glob("*") if p.is_dir() and not p.name.startswith("_"))


def result_dates(model_dir: Path) -> list[str]:
    """The dates, oldest first, for which `model_dir` holds a results.json."""
    return sorted(d.name for d in model_dir.glob("*") if (d / RESULTS_FILE).is_file())
