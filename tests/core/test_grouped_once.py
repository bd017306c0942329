"""A run groups its results by test once and hands the grouping down: what it writes and reports
from memory must be exactly what the file models give when the same results.json is read back
and everything is grouped again. On the sample and on the second domain, with trials, errors,
hard fails and penalties in the run, for a full scope and a scope without the semantic bank."""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from eval_pipeline.core.inputs.banks import Mechanism, SemanticTest
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.mechanisms.retrieval import Candidate, Selection, SemanticRetrieval
from eval_pipeline.core.report.conclusion import Evaluation, Observed, RunSetup, evaluate
from eval_pipeline.core.report.failures import failing_tests, failure_lines
from eval_pipeline.core.report.markdown import render_markdown
from eval_pipeline.core.report.run_junit import ModelRun, render_run_junit
from eval_pipeline.core.scoring.aggregate import REFERENCE, aggregate
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.core.scoring.metrics import attributions
from eval_pipeline.core.scoring.results import ResultStatus
from eval_pipeline.core.scoring.run_document import parse_document
from eval_pipeline.core.verdicts.run_gate import Gates

TRIALS = 2
READING = "eval_pipeline.core.report.reading"
WITHOUT_SEMANTIC = Scope(banks=frozenset({Mechanism.STATE, Mechanism.PATTERN, Mechanism.ALWAYS}))


def _retrieval(test: SemanticTest, trial: int, kb: KnowledgeBase) -> SemanticRetrieval:
    """A fixed mix of outcomes by test and trial: perfect, a secondary or the primary missed, a
    forbidden entity selected, ranked the wrong way round, or errored."""
    kind = zlib.crc32(f"{test.test_id}|{trial}".encode()) % 6
    if kind == 5:
        return SemanticRetrieval(
            test_id=test.test_id, model="m", trial=trial, status="errored", error="timeout"
        )
    chosen = [*(test.expected_primary or test.expected_any[:1]), *test.expected_secondary]
    if kind == 1 and chosen:
        chosen = chosen[1:]
    if kind == 2 and test.not_expected:
        chosen.append(test.not_expected[0])
    if kind == 3 and len(chosen) > 1:
        chosen[0], chosen[1] = chosen[1], chosen[0]
    others = [e.entity_id for e in kb.entities if e.entity_id not in chosen][:5]
    return SemanticRetrieval(
        test_id=test.test_id,
        model="m",
        trial=trial,
        status="ok",
        candidates=[Candidate(entity_id=e, score=0.9 - i / 50) for i, e in enumerate([*chosen, *others])],
        selections=[Selection(entity_id=e, rank=i, reason="r") for i, e in enumerate(chosen[:6], start=1)],
        latency_ms=1.5,
    )


def _evaluation(kb: KnowledgeBase, banks: Banks, scope: Scope) -> Evaluation:
    setup = RunSetup(
        kb=kb,
        banks=banks,
        date="2026-11-20",
        model="m",
        system_config={},
        implementations={m: REFERENCE for m in Mechanism},
        pass_threshold=60,
        generated_at=datetime(2026, 11, 20, 12, tzinfo=UTC),
    )
    retrievals = (
        [_retrieval(t, trial, kb) for t in banks.semantic_tests for trial in range(TRIALS)]
        if scope.runs(Mechanism.SEMANTIC)
        else []
    )
    return evaluate(setup, Observed(retrievals), scope, Gates())


@pytest.mark.parametrize("scope", [Scope(), WITHOUT_SEMANTIC], ids=["full", "without-semantic"])
def test_what_is_made_from_memory_is_what_the_file_gives(
    sample_or_tenant: tuple[KnowledgeBase, Banks], scope: Scope
) -> None:
    kb, banks = sample_or_tenant
    run = _evaluation(kb, banks, scope)
    doc, grouped = run.document, run.reading.grouped
    written = doc.model_dump_json(indent=2)
    read = parse_document(written, "results.json")
    assert read.model_dump_json(indent=2) == written  # the file model writes the same results.json
    # The run is not trivial: the semantic bank holds every outcome, over several trials.
    if scope.runs(Mechanism.SEMANTIC):
        assert {t.trials for t in grouped.semantic} == {TRIALS}
        assert any(r.status is ResultStatus.ERRORED for r in read.semantic)
        assert any(r.hard_fail for r in read.semantic)
        assert any(r.outcome is not None and r.outcome.penalties for r in read.semantic)
    else:
        assert grouped.semantic == [] and doc.aggregate.topic_scores == {}
    # Everything made from the reading held in memory (its grouping, failing tests and the stage
    # attribution the document stored) equals the same made from the file alone.
    markdown = render_markdown(doc, reading=run.reading)
    assert markdown == render_markdown(read)
    assert ("## Stage attribution" in markdown) is scope.runs(Mechanism.SEMANTIC)
    assert failure_lines(doc, "report.md", run.reading.failures) == failure_lines(read, "report.md")
    assert render_run_junit([ModelRun("m", doc, run.gate, reading=run.reading)]) == render_run_junit(
        [ModelRun("m", read, run.gate)]
    )
    # The aggregate made from the handed-down grouping is the one made by grouping again.
    again = aggregate(
        {m: read.results(m) for m in doc.aggregate.banks},
        threshold=60,
        implementations=doc.aggregate.implementations,
    )
    assert again.model_dump_json() == doc.aggregate.model_dump_json()


def test_a_run_finds_its_failing_tests_once_and_its_stage_attribution_never_again(
    sample_or_tenant: tuple[KnowledgeBase, Banks], monkeypatch: pytest.MonkeyPatch
) -> None:
    """report.md, `run`'s output and its JUnit file share one search for the failing tests, and
    report.md shows the attribution `with_derived` has just stored rather than finding it again."""
    kb, banks = sample_or_tenant
    run = _evaluation(kb, banks, Scope())
    calls: Counter[str] = Counter()

    def counted(name: str, found: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            calls[name] += 1
            return found(*args)

        return call

    monkeypatch.setattr(f"{READING}.failing_tests", counted("failing_tests", failing_tests))
    monkeypatch.setattr(f"{READING}.attributions", counted("attributions", attributions))
    render_markdown(run.document, reading=run.reading)
    failure_lines(run.document, "report.md", run.reading.failures)
    render_run_junit([ModelRun("m", run.document, run.gate, reading=run.reading)])
    assert calls == {"failing_tests": 1}
    assert run.reading.stage_attribution  # the run has some: not found again is not none found
    render_markdown(run.document)  # a document read back finds both again
    assert calls == {"failing_tests": 2, "attributions": 1}
