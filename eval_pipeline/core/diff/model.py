"""What a diff of two runs is made of: per-test deltas (kind, cause, both sides) and the diff."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from eval_pipeline.core.diff.kb_change import KbChange
from eval_pipeline.core.diff.statistics import PairedComparison
from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.scoring.metrics import StageAttribution
from eval_pipeline.core.scoring.reevaluation import Decision
from eval_pipeline.core.scoring.trials import Outcome
from eval_pipeline.core.sparse_json import SparseModel

COLLAPSE_ALERT = "similarity collapse"  # how a content collapse alert begins (explain.collapse_alerts)


class DiffError(BadInput, ValueError):
    """Two documents that cannot be compared, or a document that cannot be read for a diff."""


class DeltaKind(StrEnum):
    CRITICAL = "critical"  # a new critical failure: reported first, a regression whatever the score
    # A still-selected primary whose similarity collapsed: a regression the score hides.
    CONTENT_COLLAPSE = "content_collapse"
    REGRESSED = "regressed"
    FIXED = "fixed"
    CHANGED = "changed"
    ADDED = "added"
    REMOVED = "removed"
    COSMETIC = "cosmetic"
    UNCHANGED = "unchanged"


class Cause(StrEnum):
    EXPECTATION = "expectation_changed"
    SYSTEM = "system_changed"


class RunRef(FrozenModel):
    model: str
    date: str
    schema_version: str
    kb_version: str
    kb_hash: str
    implementations: dict[Mechanism, str] = Field(
        default_factory=dict, description="What produced each bank (empty for documents before 1.3)"
    )

    @property
    def label(self) -> str:
        return f"{self.model}@{self.date}"


class Side(FrozenModel):
    """One test as one run saw it."""

    score: float | None  # mean of the scored trials
    outcome: Outcome
    label: str
    trials: int
    flaky: bool = False  # its trials disagree on pass/fail
    critical_failure: bool = False


class ReasonDrift(FrozenModel):
    entity_id: str
    before: str
    after: str
    trial: int = 0


class NdcgChange(FrozenModel):
    """A graded test's nDCG@10 (its final ranking, mean of the scored trials) on each side."""

    before: float
    after: float
    delta: float = Field(description="after − before, unrounded")

    @property
    def line(self) -> str:
        return f"nDCG@10 {self.before:.3f} → {self.after:.3f} ({self.delta:+.3f})"


class DroppedEntity(FrozenModel):
    entity_id: str
    original_id: str = Field(description="The imported collection's id (= entity_id when not imported)")
    gain: int
    base_rank: int = Field(description="Its place in the base's selection (first scored trial selecting it)")


class BestDropped(FrozenModel):
    """A graded test's best relevant entities (those of the top gain) that the base selected and
    the head selects none of."""

    query_id: str = Field(
        description="The test's id in the imported collection (= test_id when not imported)"
    )
    entities: list[DroppedEntity]

    @property
    def line(self) -> str:
        dropped = ", ".join(f"{e.original_id} (gain {e.gain}, was #{e.base_rank})" for e in self.entities)
        return f"best relevant dropped from the selection: {dropped}"


class PerTestDelta(SparseModel, FrozenModel):
    omitted_at_default = ("ndcg", "best_dropped")

    test_id: str
    mechanism: str
    name: str
    kind: DeltaKind
    critical: bool = Field(default=False, description="The test is marked critical")
    causes: list[Cause]
    base: Side | None
    head: Side | None
    score_delta: float | None
    penalties_added: list[str] = Field(default_factory=list)
    penalties_removed: list[str] = Field(default_factory=list)
    system_changes: list[str] = Field(default_factory=list)
    expectation_changes: list[str] = Field(default_factory=list)
    reasoning_drift: list[ReasonDrift] = Field(default_factory=list)
    cosmetic_changes: list[str] = Field(
        default_factory=list, description="Noise that is no change: top-15 reorders, numbers in reasons"
    )
    alerts: list[str] = Field(
        default_factory=list, description="e.g. a selected primary's similarity collapsed"
    )
    head_stages: list[StageAttribution] = Field(
        default_factory=list, description="Where the head's semantic hard fails and errors arose"
    )
    ndcg: NdcgChange | None = Field(
        default=None, description="Graded on both sides and scored on both: nDCG@10 before and after"
    )
    best_dropped: BestDropped | None = None


class RunDiff(SparseModel, FrozenModel):
    omitted_at_default = ("graded_statistics",)

    base: RunRef
    head: RunRef
    pass_threshold: int
    warnings: list[str]
    counts: dict[DeltaKind, int]
    base_health: str = ""
    head_health: str = ""
    head_unevaluable: list[str] = Field(
        default_factory=list, description="Banks of the head with too few scored tests to judge"
    )
    statistics: PairedComparison = Field(
        description="Semantic tests only, clustered by topic: the deterministic banks have no noise"
    )
    graded_statistics: PairedComparison | None = Field(
        default=None,
        description="Per-test nDCG@10 of the tests graded and scored on both sides, paired as the "
        "scores are (None: no such test)",
    )
    deltas: list[PerTestDelta]  # every test, grouped by kind, then in test-id order
    removed_banks: list[str] = Field(default_factory=list, description="Banks the base ran, the head not")
    kb_change: KbChange | None = Field(default=None, description="Entities that differ, by id")
    incomparable: str | None = Field(default=None, description="Why the sides are different projects")
    noise_decisions: dict[str, Decision] = Field(
        default_factory=dict,
        description="Semantic regressions the head's re-trials confirmed or dismissed against this base",
    )

    @property
    def health_changed(self) -> bool:
        return self.base_health != self.head_health

    def of_kind(self, kind: DeltaKind) -> list[PerTestDelta]:
        return [d for d in self.deltas if d.kind is kind]

    def content_collapses(self) -> list[PerTestDelta]:
        """Every test whose selected primary collapsed, critical tests first, then by id: a
        regression of its own kind that the score hides, so it fails the diff gate by default."""
        kept = [d for d in self.deltas if d.kind is not DeltaKind.REMOVED]
        found = [d for d in kept if any(a.startswith(COLLAPSE_ALERT) for a in d.alerts)]
        return sorted(found, key=lambda d: (not d.critical, d.test_id))

    def best_dropped(self) -> list[PerTestDelta]:
        """Tests whose best relevant entity left the selection: regressions first, then by id."""
        found = [d for d in self.deltas if d.best_dropped is not None]
        return sorted(found, key=lambda d: (d.kind is not DeltaKind.REGRESSED, d.test_id))

    @property
    def regressed(self) -> bool:
        kinds = (DeltaKind.REGRESSED, DeltaKind.CRITICAL, DeltaKind.CONTENT_COLLAPSE)
        return sum(self.counts.get(k, 0) for k in kinds) > 0
