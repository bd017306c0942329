"""`run --junit`: the evaluations of one `run` as JUnit test suites, one per bank and model.

A case per test (a semantic test once, over its trials), classname its bank (and a semantic
test's category), failing with the rule and reason `run` prints, an `<error>` when errored. A
last suite, `gate`, holds each model's release gate, or why no evaluation could be read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.report.failures import Failure
from eval_pipeline.core.report.reading import Reading, reading_of
from eval_pipeline.core.rounding import fmt_score
from eval_pipeline.core.scoring.results import AnyResult, SemanticResult
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.scoring.trials import TrialResults
from eval_pipeline.core.verdicts.run_gate import GateDecision

# `run` builds a ModelRun for every model it reports; the JUnit writer (ElementTree, its escaping
# regex) is imported by the functions below, for `--junit` only.
if TYPE_CHECKING:
    from eval_pipeline.core.report.junit import Case, Suite


@dataclass(frozen=True)
class ModelRun:
    """One model's evaluation as `run` read it back: its document and gate, or why there is none."""

    model: str
    document: RunDocument | None
    gate: GateDecision | None
    problem: str = ""  # why the document or the gate is missing
    reading: Reading | None = None  # the document as the caller has read it already


def _classname(prefix: str, bank: Mechanism, first: AnyResult) -> str:
    name = f"{prefix}{bank.value}"
    return f"{name}.{first.category}" if isinstance(first, SemanticResult) else name


def _seconds(t: TrialResults[AnyResult]) -> float | None:
    # Only the semantic pipeline times its calls; the deterministic banks take no measurable time.
    latencies = [r.latency_ms for r in t.rows if isinstance(r, SemanticResult)]
    return sum(latencies) / 1000 if latencies else None


def _case(prefix: str, bank: Mechanism, t: TrialResults[AnyResult], failure: Failure | None) -> Case:
    from eval_pipeline.core.report.junit import Case, Verdict

    case = Case(name=t.test_id, classname=_classname(prefix, bank, t.first), time=_seconds(t))
    if failure is None:
        return case
    critical = "critical failure; " if failure.critical else ""
    detail = f"{critical}score {fmt_score(failure.score)}; {failure.rule}: {failure.reason}"
    verdict = Verdict.ERROR if failure.score is None else Verdict.FAILURE
    return replace(
        case, verdict=verdict, message=f"{failure.rule}: {failure.reason}", kind=failure.rule, detail=detail
    )


def _properties(doc: RunDocument, bank: Mechanism, gate: GateDecision | None) -> dict[str, str]:
    p, agg = doc.provenance, doc.aggregate
    summary = agg.banks.get(bank)
    return {
        "model": p.model,
        "date": p.date,
        "kb_version": p.kb_version,
        "kb_hash": p.kb_hash,
        "health": agg.health.value,
        "combined_score": fmt_score(agg.combined_score),
        "bank_score": fmt_score(summary.average if summary else None),
        "pass_threshold": str(p.pass_threshold),
        "gate": gate.status.value if gate else "not written",
    }


def bank_suites(run: ModelRun, prefix: str) -> list[Suite]:
    """One suite per bank the model's evaluation ran; `prefix` tells models apart in one file."""
    from eval_pipeline.core.report.junit import Suite

    doc = run.document
    if doc is None:
        return []
    reading = reading_of(doc) if run.reading is None else run.reading
    failures = {(f.bank, f.test_id): f for f in reading.failures}
    timestamp = doc.provenance.generated_at.replace(tzinfo=None).isoformat(timespec="seconds")
    suites = []
    for bank in Mechanism:
        cases = [_case(prefix, bank, t, failures.get((bank, t.test_id))) for t in reading.grouped.of(bank)]
        if cases:
            suites.append(Suite(f"{prefix}{bank.value}", cases, _properties(doc, bank, run.gate), timestamp))
    return suites


def release_case(run: ModelRun) -> Case:
    """The model's release gate as a test case: the gate can fail where no single test does
    (a combined score under --fail-under), and a model with no evaluation must not vanish."""
    from eval_pipeline.core.report.junit import GATE_SUITE, Case, Verdict, gate_case

    if run.document is None or run.gate is None:
        reason = run.problem or "no evaluation was read"
        return Case(run.model, GATE_SUITE, Verdict.ERROR, reason, "no evaluation", reason)
    return gate_case(run.model, run.gate.status, run.gate.reasons, "release gate")


def render_run_junit(runs: Sequence[ModelRun]) -> str:
    """Every model of one `run` in one file; model names prefix suites and classnames only when
    there are several, so one model's file reads as its banks."""
    from eval_pipeline.core.report.junit import GATE_SUITE, Suite, render_junit

    several = len(runs) > 1
    suites = [s for run in runs for s in bank_suites(run, f"{run.model}." if several else "")]
    suites.append(Suite(name=GATE_SUITE, cases=[release_case(run) for run in runs]))
    return render_junit("eval-pipeline run", suites)
