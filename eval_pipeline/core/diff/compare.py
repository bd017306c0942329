"""Per-test diff of two run documents: two dates of one model, or two models on one date.

Each test falls in one kind: `critical` (a critical failure the base did not have, whatever the
score), `regressed` (passing → not passing), `fixed`, `changed` (same pass/fail, but the score, a
penalty, the selections, a rank, a trigger or the reasoning moved), `cosmetic` (only noise moved:
the order inside the top-15 candidates, or numbers inside a reason), `unchanged`, `added` or
`removed`. A test passes when its score (the mean of its trials) is at least the pass threshold;
an errored test is not passing, since its outcome is unknown. A selected primary whose
similarity to the query collapsed (same embedder) is flagged as an alert on its test.

Every delta names its cause: the *expectation* changed (resolved expectations, their source or
the test's own definition differ), the *system* changed (what was retrieved, triggered or
loaded differs), or both. Volatile fields (tokens, latency, cost, timestamps, raw cosine values)
are never compared. Reranker reasons are compared only when both runs used the same reranker:
two different rerankers' reasons are not drift, just different models.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeGuard

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core.diff.statistics import PairedComparison, paired_comparison, with_holm
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.report.run_document import RESULTS_FILE, RunDocument
from eval_pipeline.core.scoring.metrics import (
    RetrievalMetrics,
    StageAttribution,
    all_metrics,
    attributions,
    mean_metrics,
)
from eval_pipeline.core.scoring.results import (
    RESULT_SCHEMA_VERSION,
    AlwaysResult,
    AnyResult,
    PatternMatch,
    PatternResult,
    ResultBase,
    SemanticResult,
    StateResult,
)
from eval_pipeline.core.scoring.trials import Outcome, TestTrials, by_test, trial_of

SUPPORTED_MAJOR = int(RESULT_SCHEMA_VERSION.split(".")[0])


class DiffError(ValueError):
    """Two documents that cannot be compared, or a document that cannot be read for a diff."""


class DeltaKind(StrEnum):
    CRITICAL = "critical"  # a new critical failure: reported first, a regression whatever the score
    REGRESSED = "regressed"
    FIXED = "fixed"
    CHANGED = "changed"
    ADDED = "added"
    REMOVED = "removed"
    COSMETIC = "cosmetic"
    UNCHANGED = "unchanged"


# A selected primary whose cosine fell by this much still passes, but no longer for a reason the
# embedding can see (e.g. its content was gutted and a keyword boost kept it in).
SIMILARITY_COLLAPSE = 0.2
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


class Cause(StrEnum):
    EXPECTATION = "expectation_changed"
    SYSTEM = "system_changed"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunRef(_Frozen):
    model: str
    date: str
    schema_version: str
    kb_version: str
    kb_hash: str

    @property
    def label(self) -> str:
        return f"{self.model}@{self.date}"


class Side(_Frozen):
    """One test as one run saw it."""

    score: float | None  # mean of the scored trials
    outcome: Outcome
    label: str
    trials: int
    flaky: bool = False  # its trials disagree on pass/fail
    critical_failure: bool = False


class ReasonDrift(_Frozen):
    entity_id: str
    before: str
    after: str
    trial: int = 0


class TestDelta(_Frozen):
    __test__ = False  # not a pytest test class despite the name

    test_id: str
    mechanism: str
    name: str
    kind: DeltaKind
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


class RunDiff(_Frozen):
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
    deltas: list[TestDelta]  # every test, grouped by kind, then in test-id order

    @property
    def health_changed(self) -> bool:
        return self.base_health != self.head_health

    def of_kind(self, kind: DeltaKind) -> list[TestDelta]:
        return [d for d in self.deltas if d.kind is kind]

    @property
    def regressed(self) -> bool:
        return self.counts[DeltaKind.REGRESSED] + self.counts[DeltaKind.CRITICAL] > 0


# --- reading ---------------------------------------------------------------------------------


def load_for_diff(path: Path) -> RunDocument:
    """Read a results.json, refusing another schema major before trying to parse it."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        version = str(raw["provenance"]["schema_version"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DiffError(f"{path}: not a readable results document ({type(exc).__name__})") from None
    _require_major(version, str(path))
    try:
        return RunDocument.model_validate(raw)
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise DiffError(f"{path}: not a valid results document ({first})") from None


def _require_major(version: str, where: str) -> None:
    major = version.split(".")[0]
    if major != str(SUPPORTED_MAJOR):
        raise DiffError(
            f"{where}: results schema {version}, but this eval-pipeline reads {SUPPORTED_MAJOR}.x; "
            "refusing to compare across schema majors"
        )


# --- what is compared -------------------------------------------------------------------------

View = dict[str, Any]


def _expectation_view(r: AnyResult) -> View:
    """The test's definition and what it expects: a change here is not the system's doing."""
    if isinstance(r, SemanticResult):
        return {
            "prompt": r.prompt,
            "source": r.expectation_source,
            **r.expectations.model_dump(mode="json"),
        }
    if isinstance(r, StateResult):
        return {
            "user_state": r.user_state,
            "expected_handlers": r.expected_handlers,
            "not_expected_handlers": r.not_expected_handlers,
        }
    if isinstance(r, PatternResult):
        return {
            "prompt": r.prompt,
            "pattern_type": r.pattern_type.value,
            "is_critical": r.is_critical,
            "expected_matches": r.expected_matches,
            "expected_secondary": r.expected_secondary,
            "not_expected_matches": r.not_expected_matches,
        }
    return {"user_type": r.user_type, "expected_always": r.expected_always}


def _system_view(r: AnyResult) -> View:
    """What the system did in one trial, without volatile fields."""
    view: View = {"error": r.error}
    if isinstance(r, SemanticResult):
        view["selected"] = [s.entity_id for s in sorted(r.selections, key=lambda s: s.rank)]
        view["candidates"] = [c.entity_id for c in r.candidates]
    elif isinstance(r, StateResult):
        view["handlers"] = r.triggered_handlers
    elif isinstance(r, PatternResult):
        view["pattern match"] = [_match_text(m) for m in r.matches]
    elif isinstance(r, AlwaysResult):
        view["loaded"] = r.loaded_entities
    return view


def _match_text(m: PatternMatch) -> str:
    keyword = f" keyword '{m.keyword}'" if m.keyword else ""
    return f"{', '.join(m.entities)} by {m.kind} /{m.pattern}/{keyword} on '{m.matched_text}'"


def _penalty_lines(rows: Sequence[ResultBase]) -> list[str]:
    """Every distinct penalty across the trials, hard fails first ("-10 secondary missing: x")."""
    lines: dict[str, None] = {}
    for r in rows:
        if r.outcome is None:
            continue
        lines.update(dict.fromkeys(f"hard fail: missing primary {e}" for e in r.outcome.missing_primary))
        lines.update(dict.fromkeys(p.text for p in r.outcome.penalties))
    return list(lines)


def _reasons(r: AnyResult) -> dict[str, str]:
    if not isinstance(r, SemanticResult):
        return {}
    return {s.entity_id: " ".join(s.reason.split()) for s in r.selections if s.reason}


# --- describing a change ----------------------------------------------------------------------


def _fmt(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)


def _set_lines(label: str, before: Sequence[str], after: Sequence[str]) -> list[str]:
    added = [e for e in after if e not in before]
    removed = [e for e in before if e not in after]
    return [f"{label} +{e}" for e in added] + [f"{label} −{e}" for e in removed]


def _selection_lines(before: Sequence[str], after: Sequence[str]) -> list[str]:
    lines = [f"selected +{e} (#{after.index(e) + 1})" for e in after if e not in before]
    lines += [f"selected −{e} (was #{before.index(e) + 1})" for e in before if e not in after]
    lines += [
        f"rank {e} #{before.index(e) + 1} → #{after.index(e) + 1}"
        for e in after
        if e in before and before.index(e) != after.index(e)
    ]
    return lines


def _candidate_lines(before: Sequence[str], after: Sequence[str]) -> list[str]:
    lines = _set_lines("top 15", before, after)
    if not lines and list(before) != list(after):
        moved = sum(b != a for b, a in zip(before, after, strict=True))
        lines.append(f"top 15 reordered ({moved} places changed)")
    return lines


def _field_lines(base: View, head: View) -> list[str]:
    """One line per differing field; ordered entity lists show what changed, not both lists."""
    lines: list[str] = []
    for key in base.keys() | head.keys():
        before, after = base.get(key), head.get(key)
        if before == after:
            continue
        if key == "selected":
            lines += _selection_lines(before or [], after or [])
        elif key == "candidates":
            lines += _candidate_lines(before or [], after or [])
        elif key == "error":
            lines.append(f"errored: {after}" if after else f"no longer errored (was: {before})")
        elif _is_str_list(before) and _is_str_list(after):
            lines += _set_lines(key, before, after) or [f"{key} reordered: {_fmt(before)} → {_fmt(after)}"]
        else:
            lines.append(f"{key}: {_fmt(before)} → {_fmt(after)}")
    return sorted(lines, key=_line_order)


def _is_str_list(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


_LINE_ORDER = ("errored:", "no longer errored", "source:", "prompt:", "selected ", "rank ", "top 15 ")


def _line_order(line: str) -> tuple[int, str]:
    """Most telling first: errors, then expectation sources, selections, ranks, candidates."""
    for place, prefix in enumerate(_LINE_ORDER):
        if line.startswith(prefix):
            return place, line
    return len(_LINE_ORDER), line


def _per_trial_lines(base: Sequence[AnyResult], head: Sequence[AnyResult]) -> list[str]:
    """System changes trial by trial ("trial 2: …" when a test ran more than once)."""
    several = max(len(base), len(head)) > 1
    lines = [] if len(base) == len(head) else [f"trials {len(base)} → {len(head)}"]
    for b, h in zip(base, head, strict=False):
        prefix = f"trial {trial_of(h)}: " if several else ""
        lines += [prefix + line for line in _field_lines(_system_view(b), _system_view(h))]
    return lines


def _drift(base: Sequence[AnyResult], head: Sequence[AnyResult]) -> list[ReasonDrift]:
    drift = []
    for b, h in zip(base, head, strict=False):
        before, after = _reasons(b), _reasons(h)
        drift += [
            ReasonDrift(entity_id=e, before=before[e], after=after[e], trial=trial_of(h))
            for e in after
            if e in before and before[e] != after[e]
        ]
    return drift


# --- classifying ------------------------------------------------------------------------------


def _side(t: TestTrials[AnyResult]) -> Side:
    first = t.first
    label = first.outcome.label if t.trials == 1 and first.outcome else t.outcome.value
    label = "errored" if t.score is None else label
    critical = any(isinstance(r, PatternResult) and r.critical_failure for r in t.rows)
    return Side(
        score=t.score,
        outcome=t.outcome,
        label=label,
        trials=t.trials,
        flaky=t.flaky,
        critical_failure=critical,
    )


def _difference(before: float | None, after: float | None) -> float | None:
    return None if before is None or after is None else round(after - before, 2)


def _kind(base: Side, head: Side, moved: bool, cosmetic: bool) -> DeltaKind:
    if head.critical_failure and not base.critical_failure:
        return DeltaKind.CRITICAL
    was, now = base.outcome is Outcome.PASS, head.outcome is Outcome.PASS
    if was and not now:
        return DeltaKind.REGRESSED
    if now and not was:
        return DeltaKind.FIXED
    if moved:
        return DeltaKind.CHANGED
    return DeltaKind.COSMETIC if cosmetic else DeltaKind.UNCHANGED


def _is_cosmetic(line: str) -> bool:
    """A reorder inside the top-15 candidates: the reranker sees the same set either way."""
    return line.split(": ", 1)[-1].startswith("top 15 reordered")


def _same_but_numbers(drift: ReasonDrift) -> bool:
    return _NUMBER.sub("#", drift.before) == _NUMBER.sub("#", drift.after)


def _collapse_alerts(base: Sequence[AnyResult], head: Sequence[AnyResult]) -> list[str]:
    """Selected primaries whose similarity to the query fell by SIMILARITY_COLLAPSE or more."""
    alerts: dict[str, None] = {}
    for b, h in zip(base, head, strict=False):
        if not isinstance(b, SemanticResult) or not isinstance(h, SemanticResult):
            continue
        before = {c.entity_id: c.score for c in b.candidates}
        after = {c.entity_id: c.score for c in h.candidates}
        selected = {s.entity_id for s in h.selections}
        for e in h.expectations.expected_primary:
            if e in selected and e in before and e in after and before[e] - after[e] >= SIMILARITY_COLLAPSE:
                cosine = f"cosine {before[e]:.2f} → {after[e]:.2f}"
                alerts[f"similarity collapse: primary {e} still selected, {cosine}"] = None
    return list(alerts)


def _delta(
    b: TestTrials[AnyResult], h: TestTrials[AnyResult], compare_reasons: bool, same_embedder: bool
) -> TestDelta:
    base_rows, head_rows = list(b.rows), list(h.rows)
    expectation = _field_lines(_expectation_view(b.first), _expectation_view(h.first))
    lines = _per_trial_lines(base_rows, head_rows)
    system = [line for line in lines if not _is_cosmetic(line)]
    all_drift = _drift(base_rows, head_rows) if compare_reasons else []
    drift = [d for d in all_drift if not _same_but_numbers(d)]
    cosmetic = [line for line in lines if _is_cosmetic(line)]
    cosmetic += [
        f"reason numbers {d.entity_id}: '{d.before}' → '{d.after}'" for d in all_drift if d not in drift
    ]
    alerts = _collapse_alerts(base_rows, head_rows) if same_embedder else []
    before, after = _penalty_lines(base_rows), _penalty_lines(head_rows)
    base, head = _side(b), _side(h)
    causes = [Cause.EXPECTATION] if expectation else []
    causes += [Cause.SYSTEM] if system or drift or alerts else []
    moved = bool(causes) or before != after or base != head
    return TestDelta(
        test_id=h.test_id,
        mechanism=h.first.mechanism,
        name=h.first.name,
        kind=_kind(base, head, moved, bool(cosmetic)),
        causes=causes,
        base=base,
        head=head,
        score_delta=_difference(base.score, head.score),
        penalties_added=[p for p in after if p not in before],
        penalties_removed=[p for p in before if p not in after],
        system_changes=system,
        expectation_changes=expectation,
        reasoning_drift=drift,
        cosmetic_changes=cosmetic,
        alerts=alerts,
        head_stages=attributions([r for r in head_rows if isinstance(r, SemanticResult)]),
    )


def _one_sided(t: TestTrials[AnyResult], kind: DeltaKind) -> TestDelta:
    side = _side(t)
    return TestDelta(
        test_id=t.test_id,
        mechanism=t.first.mechanism,
        name=t.first.name,
        kind=kind,
        causes=[],
        base=side if kind is DeltaKind.REMOVED else None,
        head=side if kind is DeltaKind.ADDED else None,
        score_delta=None,
    )


# --- the diff ---------------------------------------------------------------------------------


def _tests(doc: RunDocument, threshold: int) -> dict[tuple[str, str], TestTrials[AnyResult]]:
    rows: list[AnyResult] = [*doc.semantic, *doc.state, *doc.pattern, *doc.always]
    return {(t.first.mechanism, t.test_id): t for t in by_test(rows, threshold)}


def _ref(doc: RunDocument) -> RunRef:
    p = doc.provenance
    return RunRef(
        model=p.model,
        date=p.date,
        schema_version=p.schema_version,
        kb_version=p.kb_version,
        kb_hash=p.kb_hash,
    )


def _warnings(base: RunDocument, head: RunDocument) -> list[str]:
    b, h = base.provenance, head.provenance
    out = []
    if b.kb_hash != h.kb_hash:
        out.append(
            f"KB differs: {b.kb_version} ({b.kb_hash[:12]}) → {h.kb_version} ({h.kb_hash[:12]}); "
            "system changes may come from the KB"
        )
    files = b.bank_hashes.keys() | h.bank_hashes.keys()
    banks = sorted(k for k in files if b.bank_hashes.get(k) != h.bank_hashes.get(k))
    if banks:
        out.append(f"bank files differ: {', '.join(banks)}")
    if b.pass_threshold != h.pass_threshold:
        out.append(f"pass thresholds differ: {b.pass_threshold} → {h.pass_threshold} (using the latter)")
    if b.scope != h.scope:
        out.append(f"run scopes differ: {_fmt(b.scope)} → {_fmt(h.scope)}")
    return out


def _same_stage(base: RunDocument, head: RunDocument, stage: str) -> bool:
    return base.provenance.system_config.get(stage) == head.provenance.system_config.get(stage)


def _statistics(
    deltas: Sequence[TestDelta], topics: Mapping[str, list[str]], base: RunRef, head: RunRef
) -> PairedComparison:
    """Semantic tests scored in both runs, resampled by topic cluster (a test's first topic)."""
    paired = [
        (d.base.score, d.head.score, (topics.get(d.test_id) or [d.test_id])[0])
        for d in deltas
        if d.mechanism == Mechanism.SEMANTIC.value
        and d.base
        and d.head
        and d.base.score is not None
        and d.head.score is not None
    ]
    return paired_comparison(
        [b for b, _, _ in paired],
        [h for _, h, _ in paired],
        base_label=base.label,
        head_label=head.label,
        clusters=[c for _, _, c in paired],
    )


def diff_documents(base: RunDocument, head: RunDocument) -> RunDiff:
    """Compare `head` with `base`, test by test. Raises DiffError across schema majors."""
    for doc in (base, head):
        _require_major(doc.provenance.schema_version, _ref(doc).label)
    threshold = head.provenance.pass_threshold
    before, after = _tests(base, threshold), _tests(head, threshold)
    compare_reasons = _same_stage(base, head, "reranker")
    same_embedder = _same_stage(base, head, "embedder")
    deltas = [
        _delta(before[key], after[key], compare_reasons, same_embedder)
        if key in before
        else _one_sided(after[key], DeltaKind.ADDED)
        for key in after
    ]
    deltas += [_one_sided(before[key], DeltaKind.REMOVED) for key in before if key not in after]
    kinds, mechanisms = list(DeltaKind), [m.value for m in Mechanism]
    deltas.sort(key=lambda d: (kinds.index(d.kind), mechanisms.index(d.mechanism), d.test_id))
    return RunDiff(
        base=_ref(base),
        head=_ref(head),
        pass_threshold=threshold,
        warnings=_warnings(base, head),
        counts={k: sum(d.kind is k for d in deltas) for k in DeltaKind},
        base_health=base.aggregate.health.value,
        head_health=head.aggregate.health.value,
        head_unevaluable=head.aggregate.unevaluable_reasons(),
        statistics=_statistics(deltas, {r.test_id: r.topics for r in head.semantic}, _ref(base), _ref(head)),
        deltas=deltas,
    )


# --- assets' results --------------------------------------------------------------------------


class RegressionDiff(_Frozen):
    """A run against the latest earlier run of the same model; `diff` is None without one."""

    model: str
    date: str
    baseline_date: str | None
    diff: RunDiff | None
    verdict: str
    passed_over: list[str] = Field(
        default_factory=list, description="Earlier results that could not be a baseline, and why"
    )


def against_baseline(
    head: RunDocument, baseline: RunDocument | None, passed_over: Sequence[str] = ()
) -> RegressionDiff:
    p = head.provenance
    if baseline is None:
        return RegressionDiff(
            model=p.model,
            date=p.date,
            baseline_date=None,
            diff=None,
            verdict=f"no baseline: {p.model} has no usable results dated before {p.date}",
            passed_over=list(passed_over),
        )
    diff = diff_documents(baseline, head)
    return RegressionDiff(
        model=p.model,
        date=p.date,
        baseline_date=baseline.provenance.date,
        diff=diff,
        verdict=verdict(diff),
        passed_over=list(passed_over),
    )


def verdict(diff: RunDiff) -> str:
    c = diff.counts
    kinds = ", ".join(f"{c[k]} {k.value}" for k in DeltaKind)
    health = f"health {diff.base_health} → {diff.head_health}"
    return f"{diff.base.label} → {diff.head.label}: {health}; {kinds}; semantic: {diff.statistics.verdict}"


class ModelSummary(_Frozen):
    model: str
    health: str
    combined_score: float | None
    bank_scores: dict[str, float | None]
    hard_fails: int
    errored: int
    cost_usd: float
    retrieval: RetrievalMetrics | None


class ModelComparison(_Frozen):
    """Every pair of models that have results for one date, each pair as a full diff."""

    date: str
    models: list[ModelSummary]
    pairs: list[RunDiff]
    verdicts: list[str]


def _summary(doc: RunDocument) -> ModelSummary:
    agg = doc.aggregate
    return ModelSummary(
        model=doc.provenance.model,
        health=agg.health.value,
        combined_score=agg.combined_score,
        bank_scores={m.value: b.average for m, b in agg.banks.items()},
        hard_fails=agg.hard_fail_count,
        errored=agg.errored_count,
        cost_usd=agg.cost_usd,
        retrieval=mean_metrics(all_metrics(doc.semantic)),
    )


def compare_models(date: str, docs: Sequence[RunDocument]) -> ModelComparison:
    """Pairs in the given order: the first document is the base of its pairs, and so on."""
    pairs = [diff_documents(a, b) for i, a in enumerate(docs) for b in docs[i + 1 :]]
    # Several pairs tested at once: Holm keeps the chance of any false "significant" at alpha.
    adjusted = with_holm([d.statistics for d in pairs])
    pairs = [d.model_copy(update={"statistics": s}) for d, s in zip(pairs, adjusted, strict=True)]
    verdicts = [verdict(d) for d in pairs] or [
        f"{len(docs)} model(s) with results for {date}: nothing to compare"
    ]
    return ModelComparison(date=date, models=[_summary(d) for d in docs], pairs=pairs, verdicts=verdicts)


def comparison_documents(results_dir: Path, date: str, order: Sequence[str]) -> list[RunDocument]:
    """Every model's results.json for `date`, models in `order` first, then any others by name."""
    found = {p.parent.parent.name: p for p in results_dir.glob(f"*/{date}/{RESULTS_FILE}") if p.is_file()}
    ranked = sorted(found, key=lambda m: (order.index(m) if m in order else len(order), m))
    return [load_for_diff(found[m]) for m in ranked]


def counts_by_kind(diffs: Sequence[RunDiff]) -> Mapping[str, int]:
    return {k.value: sum(d.counts[k] for d in diffs) for k in DeltaKind}
