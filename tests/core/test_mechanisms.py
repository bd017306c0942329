from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from eval_pipeline.core.inputs.banks import (
    AlwaysTest,
    CrisisPattern,
    Expectations,
    KeywordBoost,
    PatternRules,
    PatternTest,
    PatternType,
    RankCheck,
    StateTest,
)
from eval_pipeline.core.inputs.kb import Entity, EntityType, LoadMode
from eval_pipeline.core.mechanisms.always import always_loaded
from eval_pipeline.core.mechanisms.pattern import PatternMatcher
from eval_pipeline.core.mechanisms.retrieval import Candidate, Selection, SemanticRetrieval
from eval_pipeline.core.mechanisms.state import triggered_handlers
from eval_pipeline.core.scoring.registry import (
    evaluate_always_test,
    evaluate_pattern_test,
    evaluate_state_test,
)
from eval_pipeline.core.scoring.semantic import evaluate_selection
from tests.spec_tables import SPEC_HANDLER_CONDITIONS


def entity(eid: str, mode: LoadMode, etype: EntityType = EntityType.KNOWLEDGE, **kw: Any) -> Entity:
    return Entity(entity_id=eid, entity_type=etype, load_mode=mode, title=eid, summary=eid, content=eid, **kw)


HANDLERS = [
    entity(h, LoadMode.STATE, EntityType.HANDLER, state_conditions=conditions)
    for h, conditions in SPEC_HANDLER_CONDITIONS.items()
]


@pytest.mark.parametrize(
    ("state", "fired"),
    [
        ({"is_first_conversation": True, "user_type": "PARENT"}, {"handler_first_conversation"}),
        ({"is_first_conversation": False, "days_since_last": 6}, set()),
        ({"is_first_conversation": False, "days_since_last": 7}, {"handler_returning_user"}),
        ({"is_first_conversation": False, "last_rating": 2}, {"handler_post_escalation"}),
        ({"is_first_conversation": False, "last_rating": 3}, set()),
        ({"is_first_conversation": False, "last_rating": 4}, {"handler_celebrating_wins"}),
        ({"is_first_conversation": False, "days_since_last": None, "last_rating": None}, set()),
        ({"days_since_last": 30}, set()),  # missing is_first_conversation fails eq False
        ({"user_type": "PROFESSIONAL"}, {"handler_clinician_mode"}),
        ({"user_type": None}, set()),
        (
            {
                "is_first_conversation": False,
                "days_since_last": 9,
                "last_rating": 1,
                "has_pending_debrief": True,
            },
            {"handler_returning_user", "handler_post_escalation", "handler_interaction_debrief"},
        ),
    ],
)
def test_state_matcher_follows_the_specification_table(state: dict[str, Any], fired: set[str]) -> None:
    assert set(triggered_handlers(state, HANDLERS)) == fired


def test_bool_is_not_a_number_for_ordering_ops() -> None:
    assert triggered_handlers({"is_first_conversation": False, "days_since_last": True}, HANDLERS) == []


def test_state_test_scoring_wrong_handler_and_missing() -> None:
    test = StateTest(
        test_id="S",
        user_state={},
        expected_handlers=["handler_returning_user"],
        not_expected_handlers=["handler_first_conversation"],
    )
    ok = evaluate_state_test(test, ["handler_returning_user", "handler_first_conversation"])
    assert ok.score == 80 and ok.wrong_handlers == ["handler_first_conversation"]
    miss = evaluate_state_test(test, [])
    assert miss.hard_fail and miss.missing_handlers == ["handler_returning_user"]


RULES = PatternRules(
    crisis_patterns=[
        CrisisPattern(
            pattern=r"want(s)? to (die|end it)",
            entities=["handler_crisis", "rule"],
            is_critical=True,
        )
    ],
    keyword_boosts=[
        KeywordBoost(keywords=["gray rock", "grey rock"], entity="gray_rock"),
        KeywordBoost(keywords=["boundary"], entity="boundary_setting"),
    ],
)


def test_pattern_matcher_reports_what_matched_and_why() -> None:
    matches = PatternMatcher(RULES).match("Some days I WANT TO END IT. Is Grey   Rock real?")
    crisis, kw = matches
    assert crisis.kind == "crisis" and crisis.matched_text == "WANT TO END IT" and crisis.is_critical
    assert kw.keyword == "grey rock" and kw.matched_text == "Grey   Rock" and kw.entities == ["gray_rock"]


def test_keywords_match_whole_words_only() -> None:
    assert PatternMatcher(RULES).match("a boundaryless ex") == []
    assert [m.entities for m in PatternMatcher(RULES).match("one boundary.")] == [["boundary_setting"]]


def _ptest(ptype: PatternType, **kw: Any) -> PatternTest:
    return PatternTest(test_id="P", prompt="x", pattern_type=ptype, is_critical=True, **kw)


def test_missed_crisis_is_a_critical_failure() -> None:
    test = _ptest(PatternType.CRISIS, expected_matches=["handler_crisis"])
    result = evaluate_pattern_test(test, PatternMatcher(RULES).match("i am fine"))
    assert result.hard_fail and result.critical_failure
    assert result.critical_reason == "crisis not detected: missing handler_crisis"


def test_negative_that_triggers_is_a_critical_failure() -> None:
    test = _ptest(PatternType.NEGATIVE, not_expected_matches=["handler_crisis"])
    result = evaluate_pattern_test(test, PatternMatcher(RULES).match("my ex wants to end it early"))
    assert result.critical_failure and result.score == 80
    quiet = evaluate_pattern_test(test, PatternMatcher(RULES).match("dying to see my kids"))
    assert not quiet.critical_failure and quiet.score == 100


def test_uncritical_negative_is_not_critical() -> None:
    test = PatternTest(
        test_id="P", prompt="x", pattern_type=PatternType.NEGATIVE, not_expected_matches=["rule"]
    )
    assert not evaluate_pattern_test(test, PatternMatcher(RULES).match("wants to die")).critical_failure


ALWAYS = [
    entity("parent_persona", LoadMode.ALWAYS, EntityType.PERSONA, user_types=["PARENT"]),
    entity(
        "clin_persona",
        LoadMode.ALWAYS,
        EntityType.PERSONA,
        user_types=["CLINICIAN", "PROFESSIONAL"],
    ),
    entity("guardrails", LoadMode.ALWAYS, EntityType.GUARDRAIL),
    entity("gray_rock", LoadMode.SEMANTIC),
]


def test_always_loader_by_user_type() -> None:
    assert always_loaded("PARENT", ALWAYS) == ["parent_persona", "guardrails"]
    assert always_loaded("PROFESSIONAL", ALWAYS) == ["clin_persona", "guardrails"]
    test = AlwaysTest(test_id="A", user_type="CLINICIAN", expected_always=["parent_persona", "guardrails"])
    result = evaluate_always_test(test, always_loaded("CLINICIAN", ALWAYS))
    assert result.score == 0 and result.missing == ["parent_persona"]


def test_semantic_selection_evaluation() -> None:
    exp = Expectations(
        expected_primary=["a"],
        expected_secondary=["b", "c"],
        not_expected=["x"],
        rank_check=[RankCheck(higher="a", lower="b"), RankCheck(higher="a", lower="c")],
    )
    ev = evaluate_selection(["b", "a", "x"], exp)
    assert ev.primary_pass and ev.secondary_missing == ["c"] and ev.false_positives == ["x"]
    # a vs c is not checked: c was not selected.
    assert [(v.expected_higher, v.actual_higher_rank, v.actual_lower_rank) for v in ev.rank_violations] == [
        ("a", 2, 1)
    ]
    assert not evaluate_selection(["b"], exp).primary_pass


def _retrieval_text() -> str:
    retrieval = SemanticRetrieval(
        test_id="t",
        model="m",
        status="ok",
        candidates=[Candidate("a", 0.5), Candidate("b", 0.25)],
        selections=[Selection("b", 1, "cos 0.25")],
    )
    text = retrieval.model_dump_json()
    assert SemanticRetrieval.model_validate_json(text) == retrieval
    return text


@pytest.mark.parametrize(
    ("good", "bad"),
    [('"rank":1', '"rank":0'), ('"score":0.5', '"score":0.5,"extra":1'), ('"score":0.5', '"score":"high"')],
)
def test_a_retrieval_read_from_a_file_checks_its_candidates_and_selections(good: str, bad: str) -> None:
    # Inside a run candidates and selections are plain dataclasses; read from a file, pydantic
    # still holds them to their rules.
    text = _retrieval_text()
    assert good in text
    with pytest.raises(ValidationError):
        SemanticRetrieval.model_validate_json(text.replace(good, bad, 1))
