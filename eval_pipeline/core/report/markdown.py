"""Markdown report and console summary for one run document: the specification's sections, and
what a reader needs to act (penalties, errored tests, handler and pattern-type tables, expectation
conflicts, cost, provenance)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from eval_pipeline.core.control_chars import one_line
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.stage_depths import CANDIDATE_K
from eval_pipeline.core.markdown_text import table, text
from eval_pipeline.core.report.failures import Failure
from eval_pipeline.core.report.reading import Reading, reading_of
from eval_pipeline.core.rounding import fmt_score
from eval_pipeline.core.scoring.aggregate import Aggregate, GroupScore, describe_implementations
from eval_pipeline.core.scoring.metrics import (
    PerTestMetrics,
    Stage,
    StageAttribution,
    is_judged,
    mean_metrics,
    shallow_cutoffs,
)
from eval_pipeline.core.scoring.results import AnyResult, ResultStatus, SemanticResult
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.scoring.trials import TrialResults

MAX_DETAILED_FAILURES = 30
GRADED_SHOWN = 5  # graded judgments listed per test; imported sets judge dozens


def _section(title: str, header: Sequence[str], rows: Sequence[Sequence[object]], *intro: str) -> list[str]:
    """A `## title` section: `intro`, then the table of `rows`; nothing without rows."""
    return [f"## {title}", "", *intro, *table(header, rows)] if rows else []


def _summary(agg: Aggregate) -> list[str]:
    rows: list[Sequence[object]] = [
        (
            m.value,
            fmt_score(b.average),
            b.tests,
            b.scored,
            b.hard_fails,
            b.errored,
            f"{agg.weights.get(m, 0):.2f}",
            agg.implementations.get(m, "—"),  # not recorded before schema 1.3
        )
        for m, b in agg.banks.items()
    ]
    combined = f"**{fmt_score(agg.combined_score)}**"
    rows.append(
        ("**combined**", combined, agg.total_tests, "", agg.hard_fail_count, agg.errored_count, "", "")
    )
    header = ("Bank", "Score", "Tests", "Scored", "Hard fails", "Errored", "Weight", "Implementation")
    return [
        *_section("Summary", header, rows),
        "Implementation: *reference* is eval_pipeline's built-in mechanism; *http* and *python* are "
        "the team's own system.",
        "",
    ]


def _critical(agg: Aggregate) -> list[str]:
    if not agg.critical_failures:
        return ["## Critical failures", "", "None.", ""]
    lines = ["## 🚨 Critical failures", "", "Crisis detection is broken for these messages:", ""]
    lines += [
        f"- **{text(c.test_id)}**: {text(c.reason)} — “{text(c.prompt)}”" for c in agg.critical_failures
    ]
    return [*lines, ""]


def _failure_row(f: Failure) -> tuple[str, str, str, str]:
    test = f"🚨 **{text(f.test_id)}** (critical)" if f.critical else text(f.test_id)
    return test, fmt_score(f.score), text(f.rule), text(f.reason)


def _failing(failures: Sequence[Failure]) -> list[str]:
    """Every failing test, one section per bank, worst first."""
    if not failures:
        return ["## Failing tests", "", "None.", ""]
    lines: list[str] = []
    for bank in Mechanism:
        rows = [_failure_row(f) for f in failures if f.bank is bank]
        lines += _section(
            f"Failing tests — {bank.value} ({len(rows)})", ("Test", "Score", "Rule", "Reason"), rows
        )
    return lines


def _groups(title: str, groups: dict[str, GroupScore], key_name: str) -> list[str]:
    ordered = sorted(groups.items(), key=lambda kv: (kv[1].average is None, -(kv[1].average or 0), kv[0]))
    rows = [(text(k), fmt_score(g.average), g.tests, g.hard_fails, g.errored) for k, g in ordered]
    return _section(title, (key_name, "Avg score", "Tests", "Hard fails", "Errored"), rows)


def _distribution(agg: Aggregate) -> list[str]:
    bank = agg.banks.get(Mechanism.SEMANTIC)
    rows = list(bank.distribution.items()) if bank else []
    return _section("Score distribution (semantic)", ("Range", "Count"), rows)


def _sources(agg: Aggregate) -> list[str]:
    lines = [
        "## Expectation sources",
        "",
        *table(("Source", "Tests"), ((text(k), n) for k, n in agg.expectation_sources.items())),
    ]
    if agg.expectation_conflicts:
        lines += [
            f"{agg.expectation_conflicts} test(s) have a calibration that disagrees with a "
            "standing human override (see results.json).",
            "",
        ]
    return lines


def _semantic_failures(results: Sequence[SemanticResult]) -> list[str]:
    failures = [r for r in results if r.hard_fail]
    if not failures:
        return []
    lines = ["## Semantic hard fails", ""]
    for r in failures[:MAX_DETAILED_FAILURES]:
        lines += [
            f"### {text(r.test_id)}: {text(r.name)}",
            f"- Prompt: {text(r.prompt)}",
            f"- Expected: {text(expectation_text(r))} (source: {text(r.expectation_source)})",
            f"- Failed: {text('; '.join(r.outcome.hard_fail_reasons) if r.outcome else '')}",
            f"- Selected: {text(', '.join(s.entity_id for s in r.selections)) or '(nothing)'}",
            f"- Candidates (top {min(len(r.candidates), CANDIDATE_K)} of {len(r.candidates)}): "
            f"{text(', '.join(c.entity_id for c in r.candidates[:CANDIDATE_K]))}",
            "",
        ]
    if len(failures) > MAX_DETAILED_FAILURES:
        lines += [f"…and {len(failures) - MAX_DETAILED_FAILURES} more in results.json.", ""]
    return lines


def expectation_text(r: SemanticResult) -> str:
    """What a semantic test counts as relevant, e.g. "primary a; any of [b, c]; graded d=3, e=1"."""
    exp = r.expectations
    parts = [f"primary {', '.join(exp.expected_primary)}"] if exp.expected_primary else []
    parts += [f"any of [{', '.join(exp.expected_any)}]"] if exp.expected_any else []
    graded = sorted(((g, e) for e, g in exp.relevant.items() if g > 0), key=lambda t: (-t[0], t[1]))
    if graded:
        shown = ", ".join(f"{e}={g}" for g, e in graded[:GRADED_SHOWN])
        more = f" and {len(graded) - GRADED_SHOWN} more" if len(graded) > GRADED_SHOWN else ""
        parts.append(f"graded {shown}{more}")
    return "; ".join(parts)


def _standard_cutoffs(doc: RunDocument) -> list[str]:
    values = doc.standard_metrics()
    if values is None:
        return []
    scored = [r for r in doc.semantic if r.status is ResultStatus.SCORED]
    judged = len({r.test_id for r in scored if is_judged(r.expectations)})
    shown = ", ".join(f"{name} {value:.3f}" for name, value in values.items())
    notes = shallow_cutoffs(values)
    return [
        f"Standard cutoffs over {judged} judged test(s), on each test's final ranking (the selection, then "
        f"the other candidates; trec_eval conventions, as `export-trec` writes it): {shown}.",
        "",
        *([f"Note: {'; '.join(notes)}.", ""] if notes else []),
    ]


def _metric_row(name: str, metrics: Sequence[PerTestMetrics]) -> tuple[object, ...]:
    means = mean_metrics(metrics)
    assert means is not None  # only called with at least one row
    tests = len({m.test_id for m in metrics})
    values = (means.ndcg_6, means.recall_6, means.mrr_primary, means.candidate_recall_15)
    return (name, tests, *(f"{v:.3f}" for v in values))


def _ir_metrics(doc: RunDocument) -> list[str]:
    metrics = doc.metrics()
    if not metrics:
        return []
    category = {r.test_id: r.category for r in doc.semantic}
    groups: dict[str, list[PerTestMetrics]] = {}
    for m in metrics:
        groups.setdefault(category[m.test_id], []).append(m)
    rows = [_metric_row("**all**", metrics), *(_metric_row(text(k), v) for k, v in sorted(groups.items()))]
    header = ("Category", "Tests", "nDCG@6", "Recall@6", "MRR (primary)", "Recall@15 (candidates)")
    intro = (
        "nDCG@6 with primary gain 2 and secondary gain 1; recall of primary + secondary entities in "
        "the final 6 and among the top 15 candidates; MRR of the first primary (trec_eval conventions)."
    )
    return [*_section("Retrieval metrics (semantic)", header, rows, intro, ""), *_standard_cutoffs(doc)]


def _stage_attribution(found: Sequence[StageAttribution]) -> list[str]:
    counts = ", ".join(f"{stage.value} {sum(a.stage is stage for a in found)}" for stage in Stage)
    rows = [(text(a.test_id), a.trial, a.stage.value, text(a.detail)) for a in found]
    return _section(
        "Stage attribution (semantic hard fails, nothing relevant selected, errors)",
        ("Test", "Trial", "Stage", "Detail"),
        rows,
        f"Where each primary (or every relevant entity) was lost: {counts}. *embedding*: it never "
        "reached the candidates; *reranker*: it was a candidate but was not selected.",
        "",
    )


def _trials(tests: Sequence[TrialResults[SemanticResult]]) -> list[str]:
    n = max((t.trials for t in tests), default=1)
    if n == 1:
        return []
    varying = [t for t in tests if t.flaky or (t.spread is not None and t.spread[0] != t.spread[1])]
    rows = [
        (
            text(t.test_id),
            t.trials,
            fmt_score(t.score),
            f"{t.spread[0]}–{t.spread[1]}" if t.spread else "—",
            f"{t.spread[2]:.1f}" if t.spread else "—",
            "yes" if t.pass_all else "no",
            "yes" if t.flaky else "no",
        )
        for t in varying
    ]
    summary = (
        f"{n} trials per test; pass^{n} (every trial passed): {sum(t.pass_all for t in tests)} of "
        f"{len(tests)} tests; flaky (outcome differs across trials): {sum(t.flaky for t in tests)}; "
        f"scores vary in {len(varying)}."
    )
    header = ("Test", "Trials", "Mean", "Min–max", "Std", f"pass^{n}", "Flaky")
    return ["## Trials (semantic)", "", summary, "", *(table(header, rows) if rows else [])]


def _penalties(results: Sequence[AnyResult]) -> list[str]:
    rows = [
        (r.mechanism, text(r.test_id), r.score, text("; ".join(p.text for p in r.outcome.penalties)))
        for r in results
        if r.outcome is not None and r.outcome.penalties
    ]
    return _section("Penalty breakdown", ("Bank", "Test", "Score", "Penalties"), rows)


def _errored(results: Sequence[AnyResult]) -> list[str]:
    rows = [
        (r.mechanism, text(r.test_id), text(r.error or ""))
        for r in results
        if r.status is ResultStatus.ERRORED
    ]
    return _section("Errored tests (not scored)", ("Bank", "Test", "Reason"), rows)


MAX_ERROR_REASONS = 5


def error_reasons(results: Sequence[AnyResult]) -> list[str]:
    """Errored tests grouped by reason, most frequent first: an outage or a KB that could not be
    indexed reads as one cause, not as one line per test."""
    counts = Counter(r.error or "no reason given" for r in results if r.status is ResultStatus.ERRORED)
    lines = [f"ERRORED {n} test(s): {reason}" for reason, n in counts.most_common(MAX_ERROR_REASONS)]
    others = sum(counts.values()) - sum(n for _, n in counts.most_common(MAX_ERROR_REASONS))
    return lines + ([f"ERRORED {others} more test(s) for other reasons"] if others else [])


def _handlers(agg: Aggregate) -> list[str]:
    rows = [
        (
            text(h.handler),
            f"{h.fired_when_expected}/{h.expected_in}",
            f"{h.fired_when_forbidden}/{h.forbidden_in}",
            fmt_score(h.average_of_involved_tests),
        )
        for h in agg.handler_scores.values()
    ]
    header = ("Handler", "Fired when expected", "Fired when forbidden", "Avg of involved tests")
    return _section("State handlers", header, rows)


def _pattern_types(agg: Aggregate) -> list[str]:
    rows = [
        (text(k), fmt_score(s.average), s.tests, s.hard_fails, s.critical_failures)
        for k, s in agg.pattern_type_scores.items()
    ]
    return _section("Pattern types", ("Type", "Avg score", "Tests", "Hard fails", "Critical"), rows)


def _provenance(doc: RunDocument) -> list[str]:
    p = doc.provenance
    rows = [
        ("Model", text(p.model)),
        ("Date", text(p.date)),
        ("KB", f"{text(p.kb_version)} ({p.kb_hash[:12]})"),
        ("Banks", text(", ".join(f"{k} {v[:8]}" for k, v in sorted(p.bank_hashes.items())))),
        ("History", p.history_hash[:12]),
        ("Schema", p.schema_version),
        ("Generated", p.generated_at.isoformat()),
        ("Cost (system under test)", f"${doc.aggregate.cost_usd:.4f}"),
        ("Calibration cost that day (not system under test)", f"${p.calibration_cost_usd:.4f}"),
        ("Tokens in/out", f"{doc.aggregate.usage.input_tokens}/{doc.aggregate.usage.output_tokens}"),
        ("Rerank mode", text(p.rerank_mode)),
    ]
    if p.prompt_cache is not None:
        rows.append(("Reranker prompt cache", text(p.prompt_cache)))
    return _section("Provenance and cost", ("", ""), rows)


def render_markdown(doc: RunDocument, since: Sequence[str] = (), reading: Reading | None = None) -> str:
    """The report; `since` is the "since last run" section, once the regression diff exists.
    `reading`: `doc` as the caller has read it already (grouped, its failures found)."""
    agg = doc.aggregate
    results = doc.all_results()
    run = reading_of(doc) if reading is None else reading
    lines = [
        f"# Retrieval evaluation — {text(doc.provenance.model)} — {text(doc.provenance.date)}",
        "",
        f"**Health: {agg.health.value}** · combined score {fmt_score(agg.combined_score)} · "
        f"{agg.total_tests} tests · {agg.hard_fail_count} hard fails · {agg.errored_count} errored",
        "",
        *[f"- **Could not evaluate** {text(line)}" for line in agg.unevaluable_reasons()],
        *_summary(agg),
        *_critical(agg),
        *since,
        *_failing(run.failures),
        *_distribution(agg),
        *_groups("Topic scores (semantic)", agg.topic_scores, "Topic"),
        *_groups("Category scores (semantic)", agg.category_scores, "Category"),
        *_ir_metrics(doc),
        *_sources(agg),
        *_semantic_failures(doc.semantic),
        *_stage_attribution(run.stage_attribution),
        *_trials(run.grouped.semantic),
        *_penalties(results),
        *_errored(results),
        *_handlers(agg),
        *_pattern_types(agg),
        *_provenance(doc),
    ]
    return "\n".join(lines).rstrip() + "\n"


def console_summary(doc: RunDocument) -> str:
    agg = doc.aggregate
    parts = ", ".join(f"{m.value} {fmt_score(b.average)}" for m, b in agg.banks.items())
    sources = ", ".join(f"{k} {v}" for k, v in agg.expectation_sources.items())
    lines = [
        f"{doc.provenance.model} @ {doc.provenance.date}: {agg.health.value} — "
        f"combined {fmt_score(agg.combined_score)} ({parts})",
        f"  tests {agg.total_tests}, hard fails {agg.hard_fail_count}, "
        f"errored {agg.errored_count}, critical failures {len(agg.critical_failures)}; "
        f"expectations: {sources}; cost ${agg.cost_usd:.4f}",
    ]
    standard = doc.standard_metrics()
    if standard is not None:
        lines.append("  semantic ir metrics: " + ", ".join(f"{k} {v:.3f}" for k, v in standard.items()))
        lines += [f"    note: {note}" for note in shallow_cutoffs(standard)]
    # Documents written before implementations were recorded (schema < 1.3) say nothing.
    lines += (
        [f"  implementations: {describe_implementations(agg.implementations)}"] if agg.implementations else []
    )
    lines += [f"  CRITICAL {c.test_id}: {c.reason}" for c in agg.critical_failures]
    lines += [f"  {line}" for line in error_reasons(doc.all_results())]
    lines += [f"  COULD NOT EVALUATE {line}" for line in agg.unevaluable_reasons()]
    return "\n".join(one_line(line) for line in lines)  # a newline in a reason stays in its line
