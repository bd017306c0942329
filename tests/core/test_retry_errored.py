"""Retrying the errored tests of an evaluation whose every bank the team's system answered, on the
pure core (the CLI path is in tests/test_cli_retry_errored.py): after a seeded partial outage that
errored some tests of every mechanism, the errored semantic trials and the system's errored
state/pattern/always answers are evaluated again and merged on the one route; the merged
evaluation is the one a day without the outage would have given, row for row, and its
provenance names the tests retried per bank. Sample data and the tenant-domain fixture."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from datetime import UTC, datetime

import pytest

from eval_pipeline.core.expectations.resolution import ResolvedExpectation, resolve
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.mechanisms.retrieval import Candidate, Selection, SemanticRetrieval
from eval_pipeline.core.report.conclusion import Observed, RunSetup, evaluate, verdict
from eval_pipeline.core.scoring.evaluation import MechanismOutput, Scope
from eval_pipeline.core.scoring.reevaluate import (
    ReevaluationError,
    errored_answers,
    errored_tests,
    reevaluate,
    retry_of,
)
from eval_pipeline.core.scoring.reevaluation import StoredReevaluation, StoredReevaluations, Why
from eval_pipeline.core.scoring.registry import DETERMINISTIC, PATTERN, STATE
from eval_pipeline.core.scoring.run_document import RunDocument, parse_document
from eval_pipeline.core.verdicts.run_gate import Gates, GateStatus
from tests.conftest import REPO, TENANT

AT = datetime(2026, 11, 21, 7, tzinfo=UTC)
DATE = "2026-11-20"
OUTAGE = "target: HTTP 500 after 1 attempt"
DATASETS = {
    "sample": (REPO / "kb", REPO / "test_banks"),
    "tenant": (TENANT / "kb.yaml", TENANT / "banks"),
}
SYSTEM = dict.fromkeys(Mechanism, "http")


class TeamSystem:
    """The team's system as the core sees it: its correct answers for every bank, and the same
    answers with a seeded partial outage (about a third of each bank's calls fail)."""

    def __init__(self, kb: KnowledgeBase, banks: Banks) -> None:
        self.kb, self.banks = kb, banks
        self.resolved: Mapping[str, ResolvedExpectation] = resolve(banks.semantic_tests, banks.history)
        assert banks.rules is not None
        self.answers = {
            o.test_id: o.model_copy(update={"mechanism": d.mechanism})
            for d in DETERMINISTIC
            for o in d.reference(kb, banks, d.tests(banks))
        }
        self.calls: dict[Mechanism, int] = dict.fromkeys(Mechanism, 0)

    def retrieve(self, test_id: str, down: bool = False) -> SemanticRetrieval:
        self.calls[Mechanism.SEMANTIC] += 1
        if down:
            return SemanticRetrieval(test_id=test_id, model="team", status="errored", error=OUTAGE)
        e = self.resolved[test_id].expectations
        picks = list(dict.fromkeys([*e.expected_primary, *e.expected_secondary]))[:6]
        return SemanticRetrieval(
            test_id=test_id,
            model="team",
            status="ok",
            candidates=[Candidate(entity_id=p, score=0.9 - i / 100) for i, p in enumerate(picks)],
            selections=[Selection(entity_id=p, rank=i) for i, p in enumerate(picks, 1)],
            api_calls=1,
        )

    def answer(self, test_id: str, down: bool = False) -> MechanismOutput:
        right = self.answers[test_id]
        assert right.mechanism is not None
        self.calls[right.mechanism] += 1
        return right.model_copy(update={"entities": [], "matches": [], "error": OUTAGE}) if down else right

    def evaluate(self, outage: frozenset[str] = frozenset()) -> RunDocument:
        retrievals = [self.retrieve(t.test_id, t.test_id in outage) for t in self.banks.semantic_tests]
        outputs = [self.answer(tid, tid in outage) for tid in self.answers]
        setup = RunSetup(
            kb=self.kb,
            banks=self.banks,
            date=DATE,
            model="team",
            system_config={"system": {"kind": "http"}},
            implementations=SYSTEM,
            pass_threshold=60,
            generated_at=AT,
        )
        return evaluate(setup, Observed(retrievals, outputs), Scope(), Gates()).document


def _outage(banks: Banks, seed: int) -> dict[Mechanism, list[str]]:
    """A third of each bank's tests (at least one), chosen by the seed."""
    draw = random.Random(seed)
    ids = {m: [t.test_id for t in banks.tests(m)] for m in Mechanism}
    return {m: sorted(draw.sample(tests, max(1, len(tests) // 3))) for m, tests in ids.items()}


@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_retrying_a_partial_outage_of_every_bank_gives_the_day_without_it(dataset: str) -> None:
    kb, banks = load_validated(*DATASETS[dataset])
    team = TeamSystem(kb, banks)
    clean = team.evaluate()
    outage = _outage(banks, seed=27)
    hurt = team.evaluate(frozenset(tid for ids in outage.values() for tid in ids))
    assert errored_tests(hurt) == {tid: [0] for tid in outage[Mechanism.SEMANTIC]}
    answers = errored_answers(hurt, system=True)  # in bank order
    assert {m: sorted(ids) for m, ids in answers.items()} == {
        m: ids for m, ids in outage.items() if m is not Mechanism.SEMANTIC
    }
    assert errored_answers(hurt, system=False) == {}
    assert hurt.aggregate.errored_count == sum(len(ids) for ids in outage.values())

    team.calls = dict.fromkeys(Mechanism, 0)
    stored = retry_of(
        AT,
        [team.retrieve(tid) for tid in errored_tests(hurt)],
        [team.answer(tid) for ids in answers.values() for tid in ids],
    )
    assert team.calls == {m: len(ids) for m, ids in outage.items()}  # only the errored ones, once each
    merged = reevaluate(hurt, banks, team.resolved, stored)

    assert merged.aggregate.errored_count == 0 and errored_answers(merged, system=True) == {}
    for rows in ("semantic", "state", "pattern", "always"):
        assert getattr(merged, rows) == getattr(clean, rows), rows
    assert merged.aggregate == clean.aggregate
    assert merged.retrieval_metrics == clean.retrieval_metrics
    [record] = merged.provenance.reevaluations
    assert record.why is Why.RETRY_ERRORED and record.banks == outage
    assert record.test_ids == sorted(tid for ids in outage.values() for tid in ids)
    assert record.api_calls == sum(team.calls.values())
    # The evaluation keeps its identity: only the results and the record of the retry changed.
    assert merged.provenance.model_copy(update={"reevaluations": []}) == hurt.provenance


def test_an_answer_still_errored_stays_errored_and_the_gate_says_so() -> None:
    kb, banks = load_validated(*DATASETS["tenant"])
    team = TeamSystem(kb, banks)
    outage = _outage(banks, seed=5)
    hurt = team.evaluate(frozenset(outage[Mechanism.PATTERN]))
    first, *rest = outage[Mechanism.PATTERN]
    stored = retry_of(AT, [], [team.answer(first, down=True), *(team.answer(tid) for tid in rest)])
    merged = reevaluate(hurt, banks, team.resolved, stored)
    assert errored_answers(merged, system=True) == {Mechanism.PATTERN: [first]}
    assert merged.aggregate.errored_count == 1
    assert [r.test_id for r in merged.pattern] == [r.test_id for r in hurt.pattern]  # no row added
    gate = verdict(merged, Scope(), Gates(max_errored=0))
    assert gate.status is GateStatus.FAILED and gate.errored == 1


def test_an_answer_for_a_bank_the_built_in_mechanism_produced_is_refused() -> None:
    kb, banks = load_validated(*DATASETS["tenant"])
    team = TeamSystem(kb, banks)
    reference = team.evaluate().model_copy(deep=True)
    reference.aggregate.implementations[Mechanism.STATE] = "reference"
    state_test = STATE.tests(banks)[0].test_id
    with pytest.raises(ReevaluationError, match="its state bank is not the team's system's"):
        reevaluate(reference, banks, team.resolved, retry_of(AT, [], [team.answer(state_test)]))
    unnamed = team.answer(state_test).model_copy(update={"mechanism": None})
    with pytest.raises(ReevaluationError, match="names no bank"):
        retry_of(AT, [], [unnamed])


def test_built_in_errored_tests_are_told_apart_from_the_systems() -> None:
    kb, banks = load_validated(*DATASETS["tenant"])
    doc = TeamSystem(kb, banks).evaluate(frozenset({PATTERN.tests(banks)[0].test_id}))
    as_reference = doc.model_copy(deep=True)
    as_reference.aggregate.implementations[Mechanism.PATTERN] = "reference"
    pattern = {Mechanism.PATTERN: [PATTERN.tests(banks)[0].test_id]}
    assert (errored_answers(doc, system=True), errored_answers(doc, system=False)) == (pattern, {})
    assert errored_answers(as_reference, system=True) == {}
    assert errored_answers(as_reference, system=False) == pattern


def test_re_evaluations_and_documents_written_before_the_system_was_retried_still_read() -> None:
    kb, banks = load_validated(*DATASETS["tenant"])
    team = TeamSystem(kb, banks)
    semantic = banks.semantic_tests[0].test_id
    hurt = team.evaluate(frozenset({semantic}))
    stored = retry_of(AT, [team.retrieve(semantic)])
    # A 1.7 reevaluations.json: no system answers, no per-bank record.
    older = StoredReevaluations(evaluation_id="run-1", reevaluations=[stored]).model_dump(mode="json")
    for one in older["reevaluations"]:
        del one["system_outputs"], one["record"]["banks"]
    read = StoredReevaluations.model_validate(older)
    [again] = read.for_evaluation("run-1")
    assert isinstance(again, StoredReevaluation) and again.system_outputs == []
    merged = reevaluate(hurt, banks, team.resolved, again)
    assert merged.aggregate.errored_count == 0
    # A 1.7 results document with a re-evaluation in its provenance.
    text = merged.model_dump(mode="json")
    text["provenance"]["schema_version"] = "1.7"
    for record in text["provenance"]["reevaluations"]:
        del record["banks"]
    old = parse_document(json.dumps(text), "results.json")
    assert old.provenance.reevaluations[0].banks == {} and old.provenance.reevaluations[0].test_ids == [
        semantic
    ]
