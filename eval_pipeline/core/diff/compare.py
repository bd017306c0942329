"""Per-test diff of two run documents: two dates of one model, or two models on one date.

Each test falls in one `DeltaKind`: a new critical failure whatever the score, regressed (passing
→ not), a content collapse (a still-selected primary's similarity to the query collapsed, same
embedder), fixed, changed (same pass/fail, but the score, a penalty, the selections, a rank, a
trigger or the reasoning moved), cosmetic (only the top-15 order or numbers in a reason moved),
unchanged, added or removed. A test passes when its mean score reaches the pass threshold and, if
graded, every trial selected something relevant; an errored test's unknown outcome is no pass.

Every delta names its cause: the *expectation* changed (resolved expectations, their source or the
test's definition), the *system* changed (what was retrieved, triggered or loaded), or both.
Volatile fields are never compared, nor the reasons of two different rerankers (not drift).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eval_pipeline.core.diff.explain import (
    collapse_alerts,
    expectation_view,
    field_lines,
    fmt,
    is_cosmetic,
    penalty_lines,
    per_trial_lines,
    reason_drift,
    same_trial,
)
from eval_pipeline.core.diff.graded import best_dropped, graded_statistics, ndcg_change, stores_ndcg10
from eval_pipeline.core.diff.kb_change import incomparable, kb_change
from eval_pipeline.core.diff.model import (
    Cause,
    DeltaKind,
    DiffError,
    PerTestDelta,
    ReasonDrift,
    RunDiff,
    RunRef,
    Side,
)
from eval_pipeline.core.diff.statistics import PairedComparison, paired_comparison, topic_cluster
from eval_pipeline.core.fileio import MAX_DOCUMENT_BYTES, BadFile, read_input_text
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.external_ids import OriginalIds
from eval_pipeline.core.inputs.file_reader import check_json_depth
from eval_pipeline.core.inputs.stage_depths import CANDIDATE_K
from eval_pipeline.core.scoring.metrics import attributions
from eval_pipeline.core.scoring.reevaluation import decisions_against
from eval_pipeline.core.scoring.results import RESULT_SCHEMA_VERSION, AnyResult, PatternResult, SemanticResult
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.scoring.trials import Outcome, TrialResults, by_test

SUPPORTED_MAJOR = int(RESULT_SCHEMA_VERSION.split(".")[0])
# The kinds a gate judges (core/verdicts/regression_gate.py): all that a gate-only diff lists.
GATED_KINDS = frozenset(
    {DeltaKind.CRITICAL, DeltaKind.CONTENT_COLLAPSE, DeltaKind.REGRESSED, DeltaKind.REMOVED}
)


def load_for_diff(path: Path) -> RunDocument:
    """Read a results.json, refusing another schema major before trying to parse it."""
    try:
        text = read_input_text(path, MAX_DOCUMENT_BYTES)
        check_json_depth(text)
        raw = json.loads(text)
        version = str(raw["provenance"]["schema_version"])
    except BadFile as exc:
        raise DiffError(f"{path}: not a readable results document ({exc.message})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise DiffError(f"{path}: not a readable results document ({type(exc).__name__})") from None
    require_major(version, str(path))
    try:
        return RunDocument.model_validate(raw)
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise DiffError(f"{path}: not a valid results document ({first})") from None


def require_major(version: str, where: str) -> None:
    major = version.split(".")[0]
    if major != str(SUPPORTED_MAJOR):
        raise DiffError(
            f"{where}: results schema {version}, but this eval-pipeline reads {SUPPORTED_MAJOR}.x; "
            "refusing to compare across schema majors"
        )


def _side(t: TrialResults[AnyResult]) -> Side:
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


def _kind(base: Side, head: Side, moved: bool, cosmetic: bool, collapse: bool) -> DeltaKind:
    if head.critical_failure and not base.critical_failure:
        return DeltaKind.CRITICAL
    was, now = base.outcome is Outcome.PASS, head.outcome is Outcome.PASS
    if was and not now:
        return DeltaKind.REGRESSED
    if collapse:
        return DeltaKind.CONTENT_COLLAPSE
    if now and not was:
        return DeltaKind.FIXED
    if moved:
        return DeltaKind.CHANGED
    return DeltaKind.COSMETIC if cosmetic else DeltaKind.UNCHANGED


@dataclass(frozen=True)
class _Explained:
    """What a test's delta describes; all empty when its two sides are the same trial by trial."""

    expectation: list[str] = field(default_factory=list)
    system: list[str] = field(default_factory=list)
    drift: list[ReasonDrift] = field(default_factory=list)
    cosmetic: list[str] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)
    penalties_before: list[str] = field(default_factory=list)
    penalties_after: list[str] = field(default_factory=list)


def _explain(
    base: Sequence[AnyResult], head: Sequence[AnyResult], compare_reasons: bool, same_embedder: bool
) -> _Explained:
    lines = per_trial_lines(base, head)
    drift, numbers = reason_drift(base, head) if compare_reasons else ([], [])
    cosmetic = [is_cosmetic(line) for line in lines]
    return _Explained(
        expectation=field_lines(expectation_view(base[0]), expectation_view(head[0])),
        system=[line for line, c in zip(lines, cosmetic, strict=True) if not c],
        drift=drift,
        cosmetic=[line for line, c in zip(lines, cosmetic, strict=True) if c] + numbers,
        alerts=collapse_alerts(base, head) if same_embedder else [],
        penalties_before=penalty_lines(base),
        penalties_after=penalty_lines(head),
    )


def _delta(
    b: TrialResults[AnyResult],
    h: TrialResults[AnyResult],
    compare_reasons: bool,
    same_embedder: bool,
    depth: int = CANDIDATE_K,
    ids: OriginalIds | None = None,
    stored_ndcg: tuple[bool, bool] = (False, False),
) -> PerTestDelta:
    base_rows, head_rows = list(b.rows), list(h.rows)
    head = _side(h)
    # Most tests of two runs of one model are the same: nothing to describe, nor a side to judge again.
    if len(base_rows) == len(head_rows) and all(map(same_trial, base_rows, head_rows)):
        base, explained = head, _Explained()
    else:
        base, explained = _side(b), _explain(base_rows, head_rows, compare_reasons, same_embedder)
    before, after = explained.penalties_before, explained.penalties_after
    causes = [Cause.EXPECTATION] if explained.expectation else []
    causes += [Cause.SYSTEM] if explained.system or explained.drift or explained.alerts else []
    moved = bool(causes) or before != after or base != head
    return PerTestDelta(
        test_id=h.test_id,
        mechanism=h.first.mechanism,
        name=h.first.name,
        kind=_kind(base, head, moved, bool(explained.cosmetic), collapse=bool(explained.alerts)),
        critical=_critical(h),
        causes=causes,
        base=base,
        head=head,
        score_delta=None if base.score is None or head.score is None else round(head.score - base.score, 2),
        penalties_added=[p for p in after if p not in before],
        penalties_removed=[p for p in before if p not in after],
        system_changes=explained.system,
        expectation_changes=explained.expectation,
        reasoning_drift=explained.drift,
        cosmetic_changes=explained.cosmetic,
        alerts=explained.alerts,
        head_stages=attributions([r for r in head_rows if isinstance(r, SemanticResult)], depth),
        ndcg=ndcg_change(base_rows, head_rows, stored_ndcg),
        best_dropped=best_dropped(base_rows, head_rows, ids or OriginalIds()),
    )


def _critical(t: TrialResults[AnyResult]) -> bool:
    return isinstance(t.first, PatternResult) and t.first.is_critical


def _one_sided(t: TrialResults[AnyResult], kind: DeltaKind) -> PerTestDelta:
    side = _side(t)
    return PerTestDelta(
        test_id=t.test_id,
        mechanism=t.first.mechanism,
        name=t.first.name,
        kind=kind,
        critical=_critical(t),
        causes=[],
        base=side if kind is DeltaKind.REMOVED else None,
        head=side if kind is DeltaKind.ADDED else None,
        score_delta=None,
    )


def _tests(doc: RunDocument, threshold: int) -> dict[tuple[str, str], TrialResults[AnyResult]]:
    return {(t.first.mechanism, t.test_id): t for t in by_test(doc.all_results(), threshold)}


def _banks_run(doc: RunDocument) -> set[str]:
    """The banks with at least one test in the document (a bank with no file has none)."""
    return {r.mechanism for r in doc.all_results()}


def _ref(doc: RunDocument) -> RunRef:
    p = doc.provenance
    return RunRef(
        model=p.model,
        date=p.date,
        schema_version=p.schema_version,
        kb_version=p.kb_version,
        kb_hash=p.kb_hash,
        implementations=doc.aggregate.implementations,
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
        out.append(f"run scopes differ: {fmt(b.scope)} → {fmt(h.scope)}")
    if base.candidate_depth != head.candidate_depth:
        out.append(
            f"candidate depths differ: {base.candidate_depth} → {head.candidate_depth}; "
            "candidate changes may come from the depth"
        )
    before, after = base.aggregate.implementations, head.aggregate.implementations
    changed = [m for m in before.keys() & after.keys() if before[m] != after[m]]
    if changed:
        moves = ", ".join(f"{m.value} {before[m]} → {after[m]}" for m in Mechanism if m in changed)
        out.append(
            f"implementations differ: {moves}; changes in those banks may come from the implementation"
        )
    return out


def _same_stage(base: RunDocument, head: RunDocument, stage: str) -> bool:
    return base.provenance.system_config.get(stage) == head.provenance.system_config.get(stage)


def _statistics(
    sides: Mapping[tuple[str, str], tuple[Side, Side]],
    topics: Mapping[str, list[str]],
    base: RunRef,
    head: RunRef,
) -> PairedComparison:
    """Semantic tests scored in both runs, resampled by topic cluster (a test's first topic), in
    test-id order: the figures depend on no other classification of the tests (float sums follow
    their order), so a gate-only diff computes the same ones."""
    paired = sorted(
        (test_id, b.score, h.score)
        for (mechanism, test_id), (b, h) in sides.items()
        if mechanism == Mechanism.SEMANTIC.value and b.score is not None and h.score is not None
    )
    return paired_comparison(
        [b for _, b, _ in paired],
        [h for _, _, h in paired],
        base_label=base.label,
        head_label=head.label,
        clusters=[topic_cluster(topics, test_id) for test_id, _, _ in paired],
    )


def recorded_ids(base: RunDocument, head: RunDocument) -> OriginalIds:
    """Both sides' recorded ids, the head's first: an entity the head no longer has keeps its name."""
    sides = [d.provenance.original_ids or OriginalIds() for d in (base, head)]
    return OriginalIds(
        documents={k: v for s in sides for k, v in s.documents.items()},
        queries={k: v for s in sides for k, v in s.queries.items()},
    )


def _gated(
    b: TrialResults[AnyResult], h: TrialResults[AnyResult], sides: tuple[Side, Side], same_embedder: bool
) -> bool:
    """Whether the delta `b` → `h` is of a kind a gate judges, told without describing the change:
    a new critical failure, a regression and a content collapse follow from the two sides and the
    collapse alerts alone (`_kind` decides them before looking at what moved)."""
    collapse = same_embedder and bool(collapse_alerts(b.rows, h.rows))
    return _kind(*sides, moved=False, cosmetic=False, collapse=collapse) in GATED_KINDS


def diff_documents(base: RunDocument, head: RunDocument, *, gate_only: bool = False) -> RunDiff:
    """Compare `head` with `base`, test by test. Raises DiffError across schema majors.

    `gate_only` lists only the deltas of GATED_KINDS, and counts only those: every test of
    another kind goes undescribed, and the graded statistics are left out. What a gate reads
    (those deltas, the paired statistics, coverage, identity, noise decisions) is the same as in
    the full diff, at a fraction of its cost when many tests moved (two noisy runs of a model)."""
    for doc in (base, head):
        require_major(doc.provenance.schema_version, _ref(doc).label)
    threshold = head.provenance.pass_threshold
    before, after = _tests(base, threshold), _tests(head, threshold)
    compare_reasons = _same_stage(base, head, "reranker")
    same_embedder = _same_stage(base, head, "embedder")
    ids = recorded_ids(base, head)
    stored = (stores_ndcg10(base.provenance.schema_version), stores_ndcg10(head.provenance.schema_version))
    common = [key for key in after if key in before]
    if gate_only:
        sides = {key: (_side(before[key]), _side(after[key])) for key in common}
        common = [key for key in common if _gated(before[key], after[key], sides[key], same_embedder)]
    deltas = [
        _delta(before[key], after[key], compare_reasons, same_embedder, head.candidate_depth, ids, stored)
        for key in common
    ]
    if not gate_only:
        deltas += [_one_sided(after[key], DeltaKind.ADDED) for key in after if key not in before]
        sides = {(d.mechanism, d.test_id): (d.base, d.head) for d in deltas if d.base and d.head}
    deltas += [_one_sided(before[key], DeltaKind.REMOVED) for key in before if key not in after]
    kinds, mechanisms = list(DeltaKind), [m.value for m in Mechanism]
    topics = {r.test_id: r.topics for r in head.semantic}
    deltas.sort(key=lambda d: (kinds.index(d.kind), mechanisms.index(d.mechanism), d.test_id))
    graded = None if gate_only else graded_statistics(deltas, topics, _ref(base), _ref(head))
    return RunDiff(
        base=_ref(base),
        head=_ref(head),
        pass_threshold=threshold,
        warnings=_warnings(base, head),
        counts={k: sum(d.kind is k for d in deltas) for k in DeltaKind},
        base_health=base.aggregate.health.value,
        head_health=head.aggregate.health.value,
        head_unevaluable=head.aggregate.unevaluable_reasons(),
        statistics=_statistics(sides, topics, _ref(base), _ref(head)),
        graded_statistics=graded,
        deltas=deltas,
        removed_banks=[m.value for m in Mechanism if m.value in _banks_run(base) - _banks_run(head)],
        kb_change=kb_change(base.provenance.identity, head.provenance.identity),
        incomparable=incomparable(base.provenance.identity, head.provenance.identity),
        noise_decisions=decisions_against(head.provenance.reevaluations, _ref(base).label),
    )
