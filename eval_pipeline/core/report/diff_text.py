"""Diffs for people: a console listing, and markdown for regression diffs and model comparisons
(the pull-request comment is core/report/diff_comment.py). Tests that moved are listed in full,
most telling kind first, unchanged ones as a count; each says what moved, why (expectation,
system or both) and, for a semantic hard fail, which stage lost the primary.
"""

from __future__ import annotations

from collections.abc import Sequence

from eval_pipeline.core.control_chars import one_line
from eval_pipeline.core.diff.baseline import RegressionDiff, baseline_label
from eval_pipeline.core.diff.comparison import ModelComparison, ModelSummary
from eval_pipeline.core.diff.model import DeltaKind, PerTestDelta, RunDiff
from eval_pipeline.core.diff.statistics import PairedComparison
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.markdown_text import table, text
from eval_pipeline.core.rounding import fmt_score, shown_change
from eval_pipeline.core.scoring.aggregate import REFERENCE, describe_implementations
from eval_pipeline.core.scoring.metrics import IR_MEASURES, shallow_cutoffs
from eval_pipeline.core.verdicts.regression_gate import DiffGate, diff_gate

# Every kind but the noise and the unchanged tests, most telling first (the enum's order).
DETAILED = tuple(k for k in DeltaKind if k not in (DeltaKind.COSMETIC, DeltaKind.UNCHANGED))
DROPPED = "best relevant dropped"  # listed beside the regressions; the test keeps its own kind
GRADED_STATISTICS = "statistics (graded nDCG@10)"


def points(value: float | None, signed: bool = False) -> str:
    """90 for a whole score, 66.6 for a trial mean (`fmt_score`), +3.3 for a change, — for none."""
    if value is None:
        return "—"
    return (f"{shown_change(value):+.1f}" if signed else fmt_score(value)).removesuffix(".0")


def headline(d: PerTestDelta) -> str:
    before, after = (points(s.score if s else None) for s in (d.base, d.head))
    delta = f" ({points(d.score_delta, signed=True)})" if d.score_delta else ""
    cause = " and ".join(c.value.removesuffix("_changed") for c in d.causes)  # expectation first
    why = f" · {cause} changed" if cause else ""
    return f"{d.test_id} [{d.mechanism}] {before} → {after}{delta}{why}"


def detail_lines(d: PerTestDelta) -> list[str]:
    """What moved for one test, most telling first."""
    if d.kind is DeltaKind.ADDED:
        return [f"new test ({d.head.label if d.head else ''})"]
    if d.kind is DeltaKind.REMOVED:
        critical = "critical test, " if d.critical else ""
        return [f"no longer run ({critical}was {d.base.label if d.base else ''})"]
    lines = [f"ALERT {a}" for a in d.alerts]
    lines += [d.best_dropped.line] if d.best_dropped else []
    lines += [d.ndcg.line] if d.ndcg and d.ndcg.delta else []
    lines += [f"new penalty: {p}" for p in d.penalties_added]
    lines += [f"penalty gone: {p}" for p in d.penalties_removed]
    lines += [f"expectation: {c}" for c in d.expectation_changes]
    lines += d.system_changes
    lines += [
        f"{f'trial {r.trial}: ' if r.trial else ''}reasoning drift {r.entity_id}: '{r.before}' → '{r.after}'"
        for r in d.reasoning_drift
    ]
    lines += [f"{f'trial {a.trial}: ' if a.trial else ''}stage {a.text}" for a in d.head_stages]
    return lines


def dropped_line(d: PerTestDelta) -> str:
    """A test whose best relevant entity left the selection, named by the collection's query id."""
    if d.best_dropped is None:
        return ""
    query = d.best_dropped.query_id
    named = query if query == d.test_id else f"{query} (test {d.test_id})"
    ndcg = f"; {d.ndcg.line}" if d.ndcg else ""
    return f"{named} [{kind_title(d.kind)}]: {d.best_dropped.line}{ndcg}"


def sections(diff: RunDiff) -> list[tuple[str, list[PerTestDelta], bool]]:
    """Each kind of change that has tests, as (title, tests, dropped), most telling first; the
    graded tests whose best relevant entity left the selection (dropped) right after the regressions."""
    found = []
    for kind in DETAILED:
        found.append((kind_title(kind), diff.of_kind(kind), False))
        if kind is DeltaKind.REGRESSED:
            found.append((DROPPED, diff.best_dropped(), True))
    return [s for s in found if s[1]]


def _statistics_rows(s: PairedComparison, tests: str = "Paired semantic tests") -> list[tuple[str, str]]:
    """The rows of the markdown statistics table (the labels are data: escaped)."""
    effect = "n/a" if s.effect_size is None else f"{s.effect_size:+.3f} ({s.effect_label})"
    mde = "n/a" if s.minimum_detectable_effect is None else f"±{s.minimum_detectable_effect:.2f} {s.unit}"
    labels = f"{text(s.head_label)} − {text(s.base_label)}"
    return [
        (f"{tests} (topic clusters)", f"{s.tests} ({s.clusters})"),
        (f"Mean difference ({labels})", f"{s.mean_difference:+.2f} {s.unit}"),
        ("95% CI", f"{s.ci_low:+.2f} to {s.ci_high:+.2f}"),
        ("p-value (Holm-adjusted)", f"{s.p_value:.4g} ({s.p_adjusted:.4g})"),
        ("Minimum detectable effect (80% power)", mde),
        ("Wins / ties / losses", f"{s.wins} / {s.ties} / {s.losses}"),
        ("Effect size (Cohen's d_z)", effect),
        ("Method", s.method),
    ]


def implementation_lines(diff: RunDiff) -> list[str]:
    """What produced each bank, when the team's system produced any (else nothing: the default)."""
    both = {*diff.base.implementations.values(), *diff.head.implementations.values()}
    if both <= {REFERENCE}:
        return []
    base = describe_implementations(diff.base.implementations) or "not recorded"
    head = describe_implementations(diff.head.implementations)
    return [f"implementations: {head}" if base == head else f"implementations: {base} → {head}"]


def span_lines(diff: RunDiff) -> list[str]:
    """What the comparison spans beyond the system: a KB change, banks no longer run."""
    lines = [diff.kb_change.line] if diff.kb_change else []
    return lines + [f"bank no longer run: {b}" for b in diff.removed_banks]


def kind_title(kind: DeltaKind) -> str:
    return kind.value.replace("_", " ")


def health_line(diff: RunDiff) -> str:
    if diff.health_changed:
        return f"health: {diff.base_health} → {diff.head_health}"
    return f"health: {diff.head_health} (unchanged)"


def gate_lines(gate: DiffGate) -> list[str]:
    mode = " (strict)" if gate.strict else ""
    lines = [f"gate{mode}: {gate.status.value.upper()}"]
    lines += [f"  - {r}" for r in gate.reasons]
    return lines + [f"  note: {n}" for n in gate.notes]


def render_diff_text(diff: RunDiff, gate: DiffGate | None = None) -> str:
    gate = gate or diff_gate(diff)
    lines = [f"{diff.base.label} → {diff.head.label} (pass: score ≥ {diff.pass_threshold})"]
    lines += [*implementation_lines(diff), health_line(diff), *gate_lines(gate)]
    lines += [f"warning: {w}" for w in diff.warnings] + span_lines(diff)
    for title, deltas, dropped in sections(diff):
        lines.append(f"== {title} ({len(deltas)}) ==")
        for d in deltas:
            lines += (
                [dropped_line(d)] if dropped else [headline(d), *(f"    {line}" for line in detail_lines(d))]
            )
    lines += [
        f"cosmetic: {diff.counts[DeltaKind.COSMETIC]} (top-15 reorders, numbers in reasons)",
        f"unchanged: {diff.counts[DeltaKind.UNCHANGED]}",
        f"statistics (semantic): {diff.statistics.verdict}",
        *([f"{GRADED_STATISTICS}: {diff.graded_statistics.verdict}"] if diff.graded_statistics else []),
    ]
    return "\n".join(one_line(line) for line in lines)  # a newline in data stays in its line


def _diff_body(diff: RunDiff, level: int) -> list[str]:
    h = "#" * level
    gate = diff_gate(diff)
    lines = [f"**{text(health_line(diff))}**", ""]
    lines += [f"{text(line)}\n" for line in implementation_lines(diff)]
    lines += [f"- {gate_lines(gate)[0]}", *(f"- - {text(r)}" for r in gate.reasons)]
    lines += [*(f"- note: {text(n)}" for n in gate.notes), ""]
    spans = [*diff.warnings, *span_lines(diff)]
    lines += [*(f"- ⚠️ {text(w)}" for w in spans), *([""] if spans else [])]
    lines += table(("Kind", "Tests"), ((kind_title(k), diff.counts.get(k, 0)) for k in DeltaKind))
    lines += [f"{h} Statistics (semantic tests)", "", f"**{text(diff.statistics.verdict)}**", ""]
    lines += table(("", ""), _statistics_rows(diff.statistics))
    if diff.graded_statistics:
        graded = diff.graded_statistics
        lines += [f"{h} Statistics (graded tests, nDCG@10 × 100)", "", f"**{text(graded.verdict)}**", ""]
        lines += table(("", ""), _statistics_rows(graded, "Paired graded tests"))
    for title, deltas, dropped in sections(diff):
        lines += [f"{h} {title.capitalize()} ({len(deltas)})", ""]
        if dropped:
            lines += [*(f"- {text(dropped_line(d))}" for d in deltas), ""]
        else:
            for d in deltas:
                lines += [f"{h}# {text(headline(d))}", *(f"- {text(line)}" for line in detail_lines(d)), ""]
    counts = diff.counts
    unchanged = f"{counts[DeltaKind.UNCHANGED]} tests unchanged; {counts[DeltaKind.COSMETIC]} cosmetic."
    return [*lines, f"{h} Unchanged", "", unchanged, ""]


def render_regression_markdown(result: RegressionDiff) -> str:
    title = f"# Regression diff — {text(result.model)} — {text(result.date)}"
    skipped = [f"- ⚠️ passed over as a baseline: {text(line)}" for line in result.passed_over]
    if result.diff is None:
        return "\n".join([title, "", f"{text(result.verdict)}.", "", *skipped]).rstrip() + "\n"
    baseline = f"Baseline (the latest earlier usable evaluation): {text(baseline_label(result))}."
    return "\n".join([title, "", baseline, "", *skipped, *_diff_body(result.diff, 2)]).rstrip() + "\n"


def _standard_names(comparison: ModelComparison) -> list[str]:
    """The standard cutoffs the models were measured at (each model at the depth it retrieved)."""
    found = dict.fromkeys(k for m in comparison.models for k in (m.ir_metrics or {}))
    return list(found or IR_MEASURES)


def _model_row(m: ModelSummary, banks: Sequence[str], names: Sequence[str]) -> list[object]:
    ir = m.retrieval
    metrics: list[float | None] = (
        [ir.ndcg_6, ir.recall_6, ir.mrr_primary, ir.candidate_recall_15] if ir else [None] * 4
    )
    metrics += [(m.ir_metrics or {}).get(k) for k in names]
    scores = [fmt_score(m.bank_scores.get(b)) for b in banks]
    head = [text(m.model), m.health, fmt_score(m.combined_score), *scores, m.hard_fails, m.errored]
    return [*head, *("—" if v is None else f"{v:.3f}" for v in metrics), f"${m.cost_usd:.4f}"]


def render_comparison_markdown(comparison: ModelComparison) -> str:
    banks = [m.value for m in Mechanism if any(m.value in x.bank_scores for x in comparison.models)]
    header = ("Model", "Health", "Combined", *banks, "Hard fails", "Errored")
    names = _standard_names(comparison)
    header += ("nDCG@6", "Recall@6", "MRR (primary)", "Recall@15 (candidates)", *names, "Cost")
    lines = [f"# Model comparison — {text(comparison.date)}", "", "## Models", ""]
    lines += table(header, [_model_row(m, banks, names) for m in comparison.models])
    lines += [*(f"- {note}" for note in shallow_cutoffs(names)), ""] if shallow_cutoffs(names) else []
    lines += ["## Verdicts", "", *(f"- {text(v)}" for v in comparison.verdicts), ""]
    for diff in comparison.pairs:
        lines += [f"## {text(diff.base.model)} → {text(diff.head.model)}", "", *_diff_body(diff, 3)]
    return "\n".join(lines).rstrip() + "\n"
