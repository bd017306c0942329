"""The pure side of calibration: prompt, proposal checks, diff, history entry, scope, files."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.core.calibration.files import (
    LOG_FILE,
    RESPONSES_DIR,
    CalibrationFileError,
    apply_calibration,
    calibration_cost,
    latest_documents,
    read_log,
)
from eval_pipeline.core.calibration.prompt import NOT_CALIBRATED, OUTPUT_SCHEMA, kb_text, user_turn
from eval_pipeline.core.calibration.proposals import (
    CallRecord,
    Proposal,
    build_history,
    diff_proposals,
    interpret,
    judge,
    parse_proposal,
)
from eval_pipeline.core.calibration.records import CalibrationRun, cache_read_coverage
from eval_pipeline.core.calibration.scope import ScopeError, affected_tests, retrieved_entities, scoped_tests
from eval_pipeline.core.dates import now_utc
from eval_pipeline.core.expectations.resolution import ResolvedExpectation, resolve, same_expectations
from eval_pipeline.core.inputs.banks import Expectations, RankCheck, SemanticTest
from eval_pipeline.core.inputs.history_file import HistoryChange, HistoryFile, HumanOverride, append_history
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import Banks, history_dir, load_history
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.mechanisms.retrieval import Usage
from eval_pipeline.core.scoring.run_document import RESULTS_FILE
from tests.run_docs import doc, sem

T0 = datetime(2026, 11, 20, 9, tzinfo=UTC)


@pytest.fixture
def loaded(tenant: Path) -> tuple[KnowledgeBase, Banks]:
    return load_validated(tenant / "kb.yaml", tenant / "banks")


@pytest.fixture
def kb(loaded: tuple[KnowledgeBase, Banks]) -> KnowledgeBase:
    return loaded[0]


@pytest.fixture
def tests(loaded: tuple[KnowledgeBase, Banks]) -> list[SemanticTest]:
    semantic = loaded[1].semantic
    assert semantic is not None
    return semantic.tests


def _answer(**fields: Any) -> str:
    base: dict[str, Any] = {
        "reasoning": "why",
        "expected_primary": ["rent_arrears"],
        "expected_secondary": ["deposit_return"],
        "not_expected": ["eviction_notice"],
        "rank_check": [{"higher": "rent_arrears", "lower": "deposit_return"}],
    }
    return json.dumps({**base, **fields})


def _exp(primary: list[str], secondary: list[str] | None = None) -> Expectations:
    return Expectations(expected_primary=primary, expected_secondary=secondary or [])


def _message(text: str, stop: str = "end_turn") -> dict[str, Any]:
    return {
        "content": [{"type": "thinking", "thinking": "", "signature": "s"}, {"type": "text", "text": text}],
        "stop_reason": stop,
    }


# --- prompt ----------------------------------------------------------------------------------------


def test_kb_text_holds_every_entity_in_full_and_ignores_file_order(kb: KnowledgeBase) -> None:
    text = kb_text(kb)
    for e in kb.entities:
        header = f'<entity id="{e.entity_id}" type="{e.entity_type.value}" load_mode="{e.load_mode.value}">'
        assert header in text
        assert e.title in text and e.summary in text and e.content.strip() in text
    shuffled = kb.model_copy(update={"entities": list(reversed(kb.entities))})
    assert kb_text(shuffled) == text  # the cached prefix must not change with file order


def test_user_turn_carries_the_message_metadata_and_current_expectations(tests: list[SemanticTest]) -> None:
    test = tests[1]
    current = ResolvedExpectation(
        test_id=test.test_id, expectations=test.original_expectations(), source="human_override_2026-11-19"
    )
    turn = user_turn(test, current)
    assert test.prompt in turn and test.category in turn and ", ".join(test.topics) in turn
    assert 'source="human_override"' in turn
    assert test.original_expectations().model_dump_json(exclude=set(NOT_CALIBRATED)) in turn
    assert '"expected_any"' not in turn and '"relevant"' not in turn  # never calibrated, never shown


def test_output_schema_requires_every_field_and_nothing_else() -> None:
    assert set(OUTPUT_SCHEMA["required"]) == set(OUTPUT_SCHEMA["properties"])
    assert OUTPUT_SCHEMA["additionalProperties"] is False


# --- proposals -------------------------------------------------------------------------------------


def test_a_valid_proposal_parses(kb: KnowledgeBase) -> None:
    parsed = parse_proposal("T-1", _answer(), kb)
    assert isinstance(parsed, Proposal)
    assert parsed.expectations.rank_check == [RankCheck(higher="rent_arrears", lower="deposit_return")]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"reasoning": "x", "expected_primary": ["', "not valid JSON"),
        (json.dumps({"reasoning": "x"}), "does not match the schema"),
        (_answer(expected_primary=["no_such_entity"], rank_check=[]), "unknown entity 'no_such_entity'"),
        (_answer(expected_primary=[], rank_check=[]), "expected_primary is empty"),
        (_answer(expected_primary=["handler_crisis"], rank_check=[]), "is PATTERN, not SEMANTIC"),
        (_answer(not_expected=["deposit_return"]), "in both expected_secondary and not_expected"),
        (_answer(rank_check=[{"higher": "rent_arrears", "lower": "lease_renewal"}]), "'lease_renewal'"),
        (_answer(rank_check=[{"higher": "rent_arrears", "lower": "rent_arrears"}]), "against itself"),
    ],
)
def test_an_invalid_proposal_is_rejected_with_its_reason(kb: KnowledgeBase, text: str, reason: str) -> None:
    parsed = parse_proposal("T-1", text, kb)
    assert isinstance(parsed, str) and reason in parsed


def test_interpret_reads_the_text_after_thinking_and_names_missing_answers(kb: KnowledgeBase) -> None:
    ok = interpret(CallRecord(test_id="T", response=_message(_answer())), kb)
    assert ok.status == "proposed" and ok.proposal is not None
    cut = interpret(CallRecord(test_id="T", response=_message("{", stop="max_tokens")), kb)
    assert (cut.status, cut.reason) == ("rejected", "output truncated at max_tokens")
    refused = interpret(CallRecord(test_id="T", response=_message("", stop="refusal")), kb)
    assert refused.reason == "the model refused"
    errored = interpret(CallRecord(test_id="T", error="HTTP 500 after 5 attempts"), kb)
    assert (errored.status, errored.reason) == ("errored", "HTTP 500 after 5 attempts")


# --- diff and history ------------------------------------------------------------------------------


def test_reordering_is_not_a_change() -> None:
    assert same_expectations(_exp(["a", "b"], ["c", "d"]), _exp(["b", "a"], ["d", "c"]))
    assert not same_expectations(_exp(["a"], ["c"]), _exp(["a"], ["d"]))


def _proposal(test_id: str, exp: Expectations) -> Proposal:
    return Proposal(test_id=test_id, expectations=exp, reasoning="r")


def test_diff_marks_changes_and_conflicts_with_a_standing_override() -> None:
    resolved = {
        "A": ResolvedExpectation(test_id="A", expectations=_exp(["a"]), source="original"),
        "B": ResolvedExpectation(test_id="B", expectations=_exp(["b"]), source="human_override_2026-11-19"),
        "C": ResolvedExpectation(test_id="C", expectations=_exp(["c"]), source="opus_2026-11-18"),
    }
    proposals = [_proposal("A", _exp(["a"])), _proposal("B", _exp(["x"])), _proposal("C", _exp(["y"]))]
    diffs = {d.test_id: d for d in diff_proposals(proposals, resolved)}
    assert (diffs["A"].changed, diffs["A"].conflict) == (False, False)
    assert (diffs["B"].changed, diffs["B"].conflict) == (True, True)
    assert (diffs["C"].changed, diffs["C"].conflict) == (True, False)


def _override(test_id: str, exp: Expectations, withdraw: bool = False) -> HistoryFile:
    over = HumanOverride(
        expected_primary=[] if withdraw else exp.expected_primary,
        override_date="2026-11-19",
        by="dr",
        reason="clinical",
        withdraw=withdraw,
    )
    return HistoryFile(
        version=T0,
        calibration_trigger="human_override_withdrawn" if withdraw else "human_override",
        changes=[HistoryChange(test_id=test_id, human_override=over)],
    )


def test_history_entry_records_changes_and_an_override_survives_a_disagreeing_calibration(
    kb: KnowledgeBase, tests: list[SemanticTest], tmp_path: Path
) -> None:
    history_dir = tmp_path / "history"
    rent, rep = tests[0].test_id, tests[1].test_id
    append_history(history_dir, _override(rep, _exp(["repair_requests"])))
    resolved = resolve(tests, load_history(history_dir, []))
    proposals = [
        _proposal(rent, _exp(["rent_arrears"], ["deposit_return"])),  # changed
        _proposal(rep, _exp(["script_repair_email"])),  # disagrees with the standing override
        _proposal(tests[2].test_id, tests[2].original_expectations()),  # unchanged
    ]
    diffs = diff_proposals(proposals, resolved)
    later = T0.replace(hour=12)
    entry = build_history(diffs, version=later, trigger="full", kb=kb, model="claude-opus-5-5")
    assert [c.test_id for c in entry.changes] == [rent, rep]
    assert (entry.changed_count, entry.unchanged_count) == (2, 1)
    assert (entry.kb_hash, entry.kb_version, entry.prompt_version) == (
        kb.content_hash,
        kb.kb_version,
        "calibrate-v1",
    )
    assert entry.changes[0].previous == tests[0].original_expectations()
    append_history(history_dir, entry)

    after = resolve(tests, load_history(history_dir, []))
    assert after[rent].source == "opus_2026-11-20"
    assert after[rep].source == "human_override_2026-11-19"  # the clinician's call stands
    assert after[rep].expectations.expected_primary == ["repair_requests"]
    conflict = after[rep].conflict
    assert conflict is not None and conflict.proposed.expected_primary == ["script_repair_email"]

    withdrawal = _override(rep, _exp(["repair_requests"]), withdraw=True)
    append_history(history_dir, withdrawal.model_copy(update={"version": later.replace(hour=13)}))
    final = resolve(tests, load_history(history_dir, []))
    assert final[rep].source == "opus_2026-11-20"  # the latest calibration applies again
    assert final[rep].expectations.expected_primary == ["script_repair_email"]
    assert final[rep].conflict is None


def test_a_calibration_agreeing_with_a_flagged_override_is_recorded_and_clears_the_conflict(
    kb: KnowledgeBase, tests: list[SemanticTest], tmp_path: Path
) -> None:
    history_dir = tmp_path / "history"
    rep = tests[1].test_id
    standing = _exp(["repair_requests", "mould_and_damp"])
    append_history(history_dir, _override(rep, standing))
    resolved = resolve(tests, load_history(history_dir, []))
    disagree = diff_proposals([_proposal(rep, _exp(["script_repair_email"]))], resolved)
    assert disagree[0].conflict and not disagree[0].clears_conflict
    first = build_history(disagree, version=T0.replace(hour=12), trigger="manual", kb=kb, model="m")
    append_history(history_dir, first)
    flagged = resolve(tests, load_history(history_dir, []))
    assert flagged[rep].conflict is not None

    # Same sets in another order: not a change, but it is recorded so that the flag clears.
    agree = _exp(["mould_and_damp", "repair_requests"])
    (diff,) = diff_proposals([_proposal(rep, agree)], flagged)
    assert (diff.changed, diff.conflict, diff.clears_conflict) == (False, False, True)
    second = build_history([diff], version=T0.replace(hour=13), trigger="manual", kb=kb, model="m")
    assert [c.test_id for c in second.changes] == [rep]
    append_history(history_dir, second)
    cleared = resolve(tests, load_history(history_dir, []))
    assert cleared[rep].conflict is None and cleared[rep].source == "human_override_2026-11-19"
    # Once cleared, a further agreeing proposal is simply unchanged.
    (again,) = diff_proposals([_proposal(rep, agree)], cleared)
    assert not again.recorded


def test_cache_read_coverage_skips_the_first_and_unanswered_calls() -> None:
    def call(read: int, answered: bool = True) -> CallRecord:
        usage = Usage(cache_read_input_tokens=read)
        return CallRecord(test_id="t", usage=usage, response={} if answered else None, error=None)

    calls = [call(0), call(900), call(0, answered=False), call(1000)]
    assert cache_read_coverage(calls, 1000) == [0.9, 1.0]


# --- scope ---------------------------------------------------------------------------------------


def test_affected_tests_by_expectations_retrievals_and_topics(
    kb: KnowledgeBase, tests: list[SemanticTest]
) -> None:
    resolved = resolve(tests, [])
    by_id = {t.test_id: t for t in tests}
    # script_repair_email: named by T-REP-001's expectations; topic `repairs` (REP, MOULD, MULTI).
    why = affected_tests(
        tests, resolved, kb, ["script_repair_email"], {"T-LEASE-001": {"script_repair_email"}}
    )
    assert why["T-REP-001"] == ["expectations name script_repair_email", "topic repairs"]
    assert why["T-LEASE-001"] == ["last retrieval had script_repair_email"]
    assert why["T-MOULD-001"] == ["topic repairs"]
    assert set(why) == {"T-REP-001", "T-LEASE-001", "T-MOULD-001", "T-MULTI-001"}
    assert all("repairs" in by_id[t].topics for t in set(why) - {"T-LEASE-001"})
    # An entity nobody names, retrieves or shares a topic with affects nothing.
    assert affected_tests(tests, resolved, kb, ["tenant_persona"], {}) == {}


def test_retrieved_entities_come_from_each_models_latest_results(tmp_path: Path) -> None:
    old = doc([sem("T-1", ["a"], candidates=["a", "old_one"])], model="m", date="2026-11-18")
    new = doc([sem("T-1", ["a"], candidates=["a", "b", "new_one"])], model="m", date="2026-11-19")
    other = doc([sem("T-2", ["c"])], model="n", date="2026-11-17")
    for d in (old, new, other):
        path = tmp_path / d.provenance.model / d.provenance.date / RESULTS_FILE
        path.parent.mkdir(parents=True)
        path.write_text(d.model_dump_json())
    (tmp_path / "broken" / "2026-11-19").mkdir(parents=True)
    (tmp_path / "broken" / "2026-11-19" / RESULTS_FILE).write_text("{")
    docs, unreadable = latest_documents(tmp_path)
    assert retrieved_entities(docs) == {"T-1": {"a", "b", "new_one"}, "T-2": {"c"}}
    assert unreadable == [str(tmp_path / "broken" / "2026-11-19" / RESULTS_FILE)]


def test_scope_selection_and_its_mistakes(kb: KnowledgeBase, tests: list[SemanticTest]) -> None:
    resolved = resolve(tests, [])
    assert len(scoped_tests("full", tests, kb, resolved)[0]) == len(tests)
    single, _ = scoped_tests("single", tests, kb, resolved, test_ids=["T-DEP-001"])
    assert [t.test_id for t in single] == ["T-DEP-001"]
    affected, why = scoped_tests("affected", tests, kb, resolved, added_entities=["deposit_return"])
    assert [t.test_id for t in affected] == list(why) == ["T-RENT-001", "T-DEP-001", "T-MULTI-001"]
    assert set(why["T-MULTI-001"]) == {"topic money"}
    for scope, kwargs, message in [
        ("single", {"test_ids": ["NOPE"]}, "unknown: NOPE"),
        ("single", {}, "needs known test ids"),
        ("affected", {"added_entities": ["nope"]}, "unknown: nope"),
        ("full", {"test_ids": ["T-DEP-001"]}, "single scope"),
    ]:
        with pytest.raises(ScopeError, match=message):
            scoped_tests(scope, tests, kb, resolved, **kwargs)  # type: ignore[arg-type]


# --- files ---------------------------------------------------------------------------------------


def _run(kb: KnowledgeBase, tests: list[SemanticTest], started: datetime) -> CalibrationRun:
    resolved = resolve(tests, [])
    calls = [
        CallRecord(
            test_id=tests[0].test_id,
            usage=Usage(input_tokens=10, output_tokens=5),
            response=_message(_answer(expected_primary=["rent_arrears", "eviction_notice"], not_expected=[])),
        ),
        CallRecord(test_id=tests[1].test_id, response=_message("not json")),
        CallRecord(test_id=tests[2].test_id, error="HTTP 529 after 5 attempts"),
    ]
    outcomes, diffs = judge(calls, kb, resolved)
    return CalibrationRun(
        scope="full",
        trigger="full",
        model="claude-opus-5-5",
        mode="sequential",
        kb=kb,
        started=started,
        duration_s=1.5,
        prefix_tokens=100,
        calls=calls,
        outcomes=outcomes,
        diffs=diffs,
        cost_usd=0.01,
    )


def test_apply_writes_one_of_each_file_and_never_overwrites(
    kb: KnowledgeBase, tests: list[SemanticTest], tmp_path: Path
) -> None:
    history, cal = history_dir(tmp_path), tmp_path / "calibration"
    run = _run(kb, tests, T0)
    first = apply_calibration(history, cal, run)
    second = apply_calibration(history, cal, run)  # same second: new names, nothing replaced
    assert first.history is not None and second.history is not None
    written = now_utc().date().isoformat()  # history is named and stamped when it is written
    assert first.history.name == f"expectations_{written}.json"
    assert second.history.name == f"expectations_{written}_2.json"
    assert first.responses.name == "calibration_2026-11-20T09-00-00Z.json"
    assert second.responses.name == "calibration_2026-11-20T09-00-00Z_2.json"
    records = read_log(cal / LOG_FILE).records
    assert [r.response_file for r in records] == [str(first.responses), str(second.responses)]
    record = records[0]
    assert (record.changed, record.unchanged, record.cost_usd) == (1, 0, 0.01)
    assert [(r.test_id, r.status) for r in record.rejected] == [
        (tests[1].test_id, "rejected"),
        (tests[2].test_id, "errored"),
    ]
    assert json.loads(first.responses.read_text())["calls"][2]["error"] == "HTTP 529 after 5 attempts"
    assert calibration_cost(cal, "2026-11-20") == 0.02 and calibration_cost(cal, "2026-11-21") == 0


def test_concurrent_applies_all_land(kb: KnowledgeBase, tests: list[SemanticTest], tmp_path: Path) -> None:
    history, cal = history_dir(tmp_path), tmp_path / "calibration"
    runs = [_run(kb, tests, T0.replace(minute=i)) for i in range(6)]
    threads = [threading.Thread(target=apply_calibration, args=(history, cal, r)) for r in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(load_history(history, [])) == 6
    assert len(list((cal / RESPONSES_DIR).glob("*.json"))) == 6
    assert sorted(r.calibration_id for r in read_log(cal / LOG_FILE).records) == sorted(
        r.calibration_id for r in runs
    )


def test_an_unreadable_log_is_never_replaced(
    kb: KnowledgeBase, tests: list[SemanticTest], tmp_path: Path
) -> None:
    cal = tmp_path / "calibration"
    cal.mkdir()
    (cal / LOG_FILE).write_text("{ not json")
    with pytest.raises(CalibrationFileError):
        apply_calibration(history_dir(tmp_path), cal, _run(kb, tests, T0))
    assert (cal / LOG_FILE).read_text() == "{ not json"


def test_no_valid_proposal_means_no_history_file(
    kb: KnowledgeBase, tests: list[SemanticTest], tmp_path: Path
) -> None:
    calls = [CallRecord(test_id=tests[0].test_id, error="timeout after 5 attempts")]
    outcomes, diffs = judge(calls, kb, resolve(tests, []))
    run = _run(kb, tests, T0).model_copy(update={"calls": calls, "outcomes": outcomes, "diffs": diffs})
    written = apply_calibration(history_dir(tmp_path), tmp_path / "cal", run)
    assert written.history is None and written.responses.exists()
    assert read_log(written.log).records[0].history_file is None


def test_history_is_stamped_when_it_is_written(
    kb: KnowledgeBase, tests: list[SemanticTest], tmp_path: Path
) -> None:
    before = now_utc()
    written = apply_calibration(tmp_path / "history", tmp_path / "calibration", _run(kb, tests, T0))
    assert written.history is not None
    entry = HistoryFile.model_validate_json(written.history.read_text())
    assert entry.version >= before > T0  # not the run's start: it sorts after anything made meanwhile
