"""Markdown report and console summary for one run document.

Sections follow the specification's report (summary, critical failures, distribution, topics,
expectation sources, failures) and add what users need to act: penalty breakdowns, errored
tests with reasons, handler and pattern-type tables, expectation conflicts, cost, provenance.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from eval_pipeline.core.aggregate import Aggregate, GroupScore
from eval_pipeline.core.banks import Mechanism
from eval_pipeline.core.results import AnyResult, SemanticResult, TestStatus
from eval_pipeline.core.run_document import RunDocument

MAX_DETAILED_FAILURES = 30


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _summary(agg: Aggregate) -> list[str]:
    rows: list[Sequence[object]] = [
        (
            m.value,
            _fmt(b.average),
            b.tests,
            b.scored,
            b.hard_fails,
            b.errored,
            f"{agg.weights.get(m, 0):.2f}",
        )
        for m, b in agg.banks.items()
    ]
    rows.append(
        (
            "**combined**",
            f"**{_fmt(agg.combined_score)}**",
            agg.total_tests,
            "",
            agg.hard_fail_count,
            agg.errored_count,
            "",
        )
    )
    return [
        "## Summary",
        "",
        *_table(("Bank", "Score", "Tests", "Scored", "Hard fails", "Errored", "Weight"), rows),
    ]


def _critical(agg: Aggregate) -> list[str]:
    if not agg.critical_failures:
        return ["## Critical failures", "", "None.", ""]
    lines = ["## 🚨 Critical failures", "", "Crisis detection is broken for these messages:", ""]
    lines += [f"- **{c.test_id}**: {c.reason} — “{c.prompt}”" for c in agg.critical_failures]
    return [*lines, ""]


def _groups(title: str, groups: dict[str, GroupScore], key_name: str) -> list[str]:
    if not groups:
        return []
    ordered = sorted(groups.items(), key=lambda kv: (kv[1].average is None, -(kv[1].average or 0), kv[0]))
    rows = [(k, _fmt(g.average), g.tests, g.hard_fails, g.errored) for k, g in ordered]
    return [
        f"## {title}",
        "",
        *_table((key_name, "Avg score", "Tests", "Hard fails", "Errored"), rows),
    ]


def _distribution(agg: Aggregate) -> list[str]:
    bank = agg.banks.get(Mechanism.SEMANTIC)
    if bank is None:
        return []
    return [
        "## Score distribution (semantic)",
        "",
        *_table(("Range", "Count"), bank.distribution.items()),
    ]


def _sources(agg: Aggregate) -> list[str]:
    lines = [
        "## Expectation sources",
        "",
        *_table(("Source", "Tests"), agg.expectation_sources.items()),
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
            f"### {r.test_id}: {r.name}",
            f"- Prompt: {r.prompt}",
            f"- Expected primary: {', '.join(r.expectations.expected_primary)} "
            f"(source: {r.expectation_source})",
            f"- Missing: {', '.join(r.outcome.missing_primary) if r.outcome else ''}",
            f"- Selected: {', '.join(s.entity_id for s in r.selections) or '(nothing)'}",
            f"- Candidates (top 15): {', '.join(c.entity_id for c in r.candidates)}",
            "",
        ]
    if len(failures) > MAX_DETAILED_FAILURES:
        lines += [f"…and {len(failures) - MAX_DETAILED_FAILURES} more in results.json.", ""]
    return lines


def _penalties(results: Sequence[AnyResult]) -> list[str]:
    rows = [
        (r.mechanism, r.test_id, r.score, "; ".join(p.text for p in r.outcome.penalties))
        for r in results
        if r.outcome is not None and r.outcome.penalties
    ]
    if not rows:
        return []
    return ["## Penalty breakdown", "", *_table(("Bank", "Test", "Score", "Penalties"), rows)]


def _errored(results: Sequence[AnyResult]) -> list[str]:
    rows = [(r.mechanism, r.test_id, r.error or "") for r in results if r.status is TestStatus.ERRORED]
    if not rows:
        return []
    return ["## Errored tests (not scored)", "", *_table(("Bank", "Test", "Reason"), rows)]


def _handlers(agg: Aggregate) -> list[str]:
    if not agg.handler_scores:
        return []
    rows = [
        (
            h.handler,
            f"{h.fired_when_expected}/{h.expected_in}",
            f"{h.fired_when_forbidden}/{h.forbidden_in}",
            _fmt(h.average_of_involved_tests),
        )
        for h in agg.handler_scores.values()
    ]
    return [
        "## State handlers",
        "",
        *_table(
            ("Handler", "Fired when expected", "Fired when forbidden", "Avg of involved tests"),
            rows,
        ),
    ]


def _pattern_types(agg: Aggregate) -> list[str]:
    rows = [
        (k, _fmt(s.average), s.tests, s.hard_fails, s.critical_failures)
        for k, s in agg.pattern_type_scores.items()
    ]
    if not rows:
        return []
    return [
        "## Pattern types",
        "",
        *_table(("Type", "Avg score", "Tests", "Hard fails", "Critical"), rows),
    ]


def _provenance(doc: RunDocument) -> list[str]:
    p = doc.provenance
    rows = [
        ("Model", p.model),
        ("Date", p.date),
        ("KB", f"{p.kb_version} ({p.kb_hash[:12]})"),
        ("Banks", ", ".join(f"{k} {v[:8]}" for k, v in sorted(p.bank_hashes.items()))),
        ("History", p.history_hash[:12]),
        ("Schema", p.schema_version),
        ("Generated", p.generated_at.isoformat()),
        ("Cost (system under test)", f"${doc.aggregate.cost_usd:.4f}"),
        (
            "Tokens in/out",
            f"{doc.aggregate.usage.input_tokens}/{doc.aggregate.usage.output_tokens}",
        ),
    ]
    return ["## Provenance and cost", "", *_table(("", ""), rows)]


def all_results(doc: RunDocument) -> list[AnyResult]:
    return [*doc.semantic, *doc.state, *doc.pattern, *doc.always]


def render_markdown(doc: RunDocument) -> str:
    agg = doc.aggregate
    results = all_results(doc)
    lines = [
        f"# Retrieval evaluation — {doc.provenance.model} — {doc.provenance.date}",
        "",
        f"**Health: {agg.health.value}** · combined score {_fmt(agg.combined_score)} · "
        f"{agg.total_tests} tests · {agg.hard_fail_count} hard fails · {agg.errored_count} errored",
        "",
        *_summary(agg),
        *_critical(agg),
        *_distribution(agg),
        *_groups("Topic scores (semantic)", agg.topic_scores, "Topic"),
        *_groups("Category scores (semantic)", agg.category_scores, "Category"),
        *_sources(agg),
        *_semantic_failures(doc.semantic),
        *_penalties(results),
        *_errored(results),
        *_handlers(agg),
        *_pattern_types(agg),
        *_provenance(doc),
    ]
    return "\n".join(lines).rstrip() + "\n"


def console_summary(doc: RunDocument) -> str:
    agg = doc.aggregate
    parts = ", ".join(f"{m.value} {_fmt(b.average)}" for m, b in agg.banks.items())
    sources = ", ".join(f"{k} {v}" for k, v in agg.expectation_sources.items())
    lines = [
        f"{doc.provenance.model} @ {doc.provenance.date}: {agg.health.value} — "
        f"combined {_fmt(agg.combined_score)} ({parts})",
        f"  tests {agg.total_tests}, hard fails {agg.hard_fail_count}, "
        f"errored {agg.errored_count}, critical failures {len(agg.critical_failures)}; "
        f"expectations: {sources}; cost ${agg.cost_usd:.4f}",
    ]
    lines += [f"  CRITICAL {c.test_id}: {c.reason}" for c in agg.critical_failures]
    return "\n".join(lines)
