"""The one route (core/report/conclusion.py): inputs, what the systems did, a scope and gates in;
the run document and its gate decision out, on the sample and on the second domain."""

from __future__ import annotations

from datetime import UTC, datetime

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.mechanisms.retrieval import Selection, SemanticRetrieval
from eval_pipeline.core.report.conclusion import Observed, RunSetup, evaluate, verdict
from eval_pipeline.core.scoring.aggregate import REFERENCE
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.core.scoring.registry import STATE
from eval_pipeline.core.verdicts.run_gate import Gates, GateStatus, gate_decision

DATE = "2026-11-20"
DETERMINISTIC = Scope(banks=frozenset({Mechanism.STATE, Mechanism.PATTERN, Mechanism.ALWAYS}))


def _setup(kb: KnowledgeBase, banks: Banks) -> RunSetup:
    return RunSetup(
        kb=kb,
        banks=banks,
        date=DATE,
        model="m",
        system_config={},
        implementations={m: REFERENCE for m in Mechanism},
        pass_threshold=60,
        generated_at=datetime(2026, 11, 20, 12, tzinfo=UTC),
    )


def test_a_narrowed_evaluation_documents_and_judges_only_its_scope(
    sample_or_tenant: tuple[KnowledgeBase, Banks],
) -> None:
    kb, banks = sample_or_tenant
    run = evaluate(_setup(kb, banks), Observed(), DETERMINISTIC, Gates())
    doc = run.document
    assert set(doc.aggregate.banks) == {Mechanism.STATE, Mechanism.PATTERN, Mechanism.ALWAYS}
    assert doc.semantic == []
    assert [r.test_id for r in doc.state] == [t.test_id for t in STATE.tests(banks)]
    assert doc.provenance.scope["banks"] == ["always", "pattern", "state"]
    # The decision is the run gate's on this very document, and says which scope it covers.
    assert run.gate == gate_decision(doc, None, 0, DETERMINISTIC.label)
    assert run.gate.scope == DETERMINISTIC.label != "full"
    assert (run.gate.model, run.gate.date) == ("m", DATE)


def test_the_gates_given_are_the_gates_applied(sample_or_tenant: tuple[KnowledgeBase, Banks]) -> None:
    kb, banks = sample_or_tenant
    run = evaluate(_setup(kb, banks), Observed(), DETERMINISTIC, Gates(fail_under=100.5))
    assert run.gate.status is GateStatus.FAILED
    assert any(r.startswith("combined score") and "under 100.5" in r for r in run.gate.reasons)
    assert verdict(run.document, DETERMINISTIC, Gates()).fail_under is None


def test_errored_retrievals_make_the_verdict_unknown_never_a_pass(
    sample_or_tenant: tuple[KnowledgeBase, Banks],
) -> None:
    kb, banks = sample_or_tenant
    scope = Scope(banks=frozenset({Mechanism.SEMANTIC}))
    down = [
        SemanticRetrieval(test_id=t.test_id, model="m", status="errored", error="reranker down")
        for t in banks.semantic_tests
    ]
    run = evaluate(_setup(kb, banks), Observed(retrievals=down), scope, Gates(max_errored=10_000))
    assert run.document.aggregate.errored_count == len(banks.semantic_tests)
    assert run.gate.status is GateStatus.UNEVALUABLE and not run.gate.passed


def test_retrievals_are_scored_against_the_expectations(
    sample_or_tenant: tuple[KnowledgeBase, Banks],
) -> None:
    kb, banks = sample_or_tenant
    test = banks.semantic_tests[0]
    scope = Scope(banks=frozenset({Mechanism.SEMANTIC}), test_ids=frozenset({test.test_id}))
    wanted = test.original_expectations().expected_primary
    hit = SemanticRetrieval(
        test_id=test.test_id,
        model="m",
        status="ok",
        selections=[Selection(entity_id=e, rank=i) for i, e in enumerate(wanted, start=1)],
    )
    miss = hit.model_copy(update={"selections": []})
    scored = evaluate(_setup(kb, banks), Observed([hit]), scope, Gates()).document.semantic
    missed = evaluate(_setup(kb, banks), Observed([miss]), scope, Gates()).document.semantic
    assert [r.test_id for r in scored] == [test.test_id]
    assert not scored[0].hard_fail and missed[0].hard_fail and missed[0].score == 0
