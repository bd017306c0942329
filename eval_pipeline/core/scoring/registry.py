"""The four mechanisms, declared once (docs/architecture.md): each one's weight and result type
and, for the deterministic ones, how the built-in reference runs a test, how an output is judged
and how the team's system is asked. Semantic retrievals are scored by `evaluation.score_semantic`.
Everything that handles every bank loops over this registry instead of naming the banks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from eval_pipeline.core.inputs.banks import (
    AlwaysTest,
    AnyTest,
    Mechanism,
    PatternRules,
    PatternTest,
    PatternType,
    SemanticTest,
    StateTest,
    UserState,
)
from eval_pipeline.core.inputs.kb import KnowledgeBase, UserType
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.mechanisms.always import always_loaded
from eval_pipeline.core.mechanisms.pattern import (
    PatternMatch,
    PatternMatcher,
    PatternTimeout,
    matched_entities,
)
from eval_pipeline.core.mechanisms.state import triggered_handlers
from eval_pipeline.core.scoring.evaluation import MechanismOutput
from eval_pipeline.core.scoring.points import PenaltyKind, penalties_for, score
from eval_pipeline.core.scoring.results import (
    AlwaysResult,
    AnyResult,
    PatternResult,
    SemanticResult,
    StateResult,
    errored_result,
    result_of,
)

# The contract's models load with a request to the team's system: scoring builds none.
if TYPE_CHECKING:
    from eval_pipeline.core.inputs.contract import SystemAnswer, SystemRequest

TestT = TypeVar("TestT", bound=AnyTest)
ResultT = TypeVar("ResultT", bound=AnyResult)
# Each bank's scored tests, keyed by mechanism, in bank order; a bank that did not run is absent.
BankResults = Mapping[Mechanism, Sequence[AnyResult]]


def evaluate_state_test(test: StateTest, triggered: Sequence[str]) -> StateResult:
    """The handlers triggered against those expected and not expected."""
    missing = [h for h in test.expected_handlers if h not in triggered]
    wrong = [h for h in test.not_expected_handlers if h in triggered]
    return result_of(
        StateResult,
        test,
        outcome=score(missing, penalties_for(PenaltyKind.WRONG_HANDLER, wrong)),
        triggered_handlers=list(triggered),
        missing_handlers=missing,
        wrong_handlers=wrong,
    )


def critical_reason(test: PatternTest, missing: list[str], false_pos: list[str]) -> str | None:
    """Critical failures: a missed crisis, or a benign message that triggered crisis content."""
    if not test.is_critical:
        return None
    if test.pattern_type is PatternType.CRISIS and missing:
        return f"crisis not detected: missing {', '.join(missing)}"
    if test.pattern_type is PatternType.NEGATIVE and false_pos:
        return f"benign message triggered {', '.join(false_pos)}"
    return None


def evaluate_pattern_test(test: PatternTest, matches: list[PatternMatch]) -> PatternResult:
    """What matched against the test's expectations, and whether a miss is a critical failure."""
    entities = matched_entities(matches)
    missing = [e for e in test.expected_matches if e not in entities]
    secondary_missing = [e for e in test.expected_secondary if e not in entities]
    false_pos = [e for e in test.not_expected_matches if e in entities]
    penalties = penalties_for(PenaltyKind.SECONDARY_MISSING, secondary_missing) + penalties_for(
        PenaltyKind.FALSE_POSITIVE, false_pos
    )
    reason = critical_reason(test, missing, false_pos)
    return result_of(
        PatternResult,
        test,
        outcome=score(missing, penalties),
        matches=matches,
        matched_entities=entities,
        secondary_missing=secondary_missing,
        false_positives=false_pos,
        critical_failure=reason is not None,
        critical_reason=reason,
    )


def evaluate_always_test(test: AlwaysTest, loaded: Sequence[str]) -> AlwaysResult:
    """100 when every expected entity loaded, else a hard fail."""
    missing = [e for e in test.expected_always if e not in loaded]
    return result_of(
        AlwaysResult,
        test,
        outcome=score(missing, []),
        loaded_entities=list(loaded),
        missing=missing,
    )


@dataclass(frozen=True)
class Declared(Generic[TestT, ResultT]):
    mechanism: Mechanism
    weight: float  # its share of the combined score, renormalised over the banks run
    result: type[ResultT]
    produced: str  # what it does with an entity, named in a hard fail's reason beside what it missed

    def tests(self, banks: Banks) -> list[TestT]:
        return cast(list[TestT], list(banks.tests(self.mechanism)))

    def rows(self, results: BankResults) -> list[ResultT]:
        """This bank's results (every row under its key is of its result type)."""
        return cast(list[ResultT], list(results.get(self.mechanism, ())))


@dataclass(frozen=True)
class Deterministic(Declared[TestT, ResultT]):
    """A mechanism the harness also implements (the reference), run in-process from the KB and
    the banks, whose result the team's system may answer instead."""

    reference: Callable[[KnowledgeBase, Banks, Sequence[TestT]], list[MechanismOutput]]
    reads_kb: bool  # False: the reference runs from the banks alone (its table does not depend on the KB)
    judge: Callable[[TestT, MechanismOutput], ResultT]
    request: Callable[[TestT], SystemRequest]
    answered: Callable[[str, SystemAnswer], MechanismOutput]  # the part of the system's answer it scores
    outputs_name: str  # the graph's table of the reference's outputs
    outputs_doc: str

    def score(self, tests: Sequence[TestT], outputs: Sequence[MechanismOutput]) -> list[ResultT]:
        """Each test that has an output, judged on it, or errored with the output's reason."""
        by_id = {o.test_id: o for o in outputs}
        return [
            errored_result(self.result, t, o.error) if o.error else self.judge(t, o)
            for t in tests
            if (o := by_id.get(t.test_id)) is not None
        ]


def pattern_outputs(rules: PatternRules | None, tests: Sequence[PatternTest]) -> list[MechanismOutput]:
    """The crisis patterns and keyword boosts each test's message triggers; a pattern that times
    out errors its test."""
    if rules is None or not tests:  # a run narrowed to other banks compiles no crisis pattern
        return []
    matcher = PatternMatcher(rules)
    out = []
    for t in tests:
        try:
            matches = matcher.match(t.prompt)
        except PatternTimeout as exc:
            out.append(MechanismOutput(test_id=t.test_id, entities=[], error=str(exc)))
            continue
        out.append(MechanismOutput(test_id=t.test_id, entities=matched_entities(matches), matches=matches))
    return out


def _outputs(tests: Sequence[TestT], loaded: Callable[[TestT], list[str]]) -> list[MechanismOutput]:
    return [MechanismOutput(test_id=t.test_id, entities=loaded(t)) for t in tests]


def _ask(
    mechanism: Mechanism,
    message: str = "",
    user_type: UserType | None = None,
    user_state: UserState | None = None,
) -> SystemRequest:
    from eval_pipeline.core.inputs.contract import SystemRequest

    return SystemRequest(
        mechanism=mechanism, message=message, user_type=user_type, user_state=user_state or {}
    )


def _loaded(
    mechanism: Mechanism, read: Callable[[SystemAnswer], list[str] | None]
) -> Callable[[str, SystemAnswer], MechanismOutput]:
    return lambda test_id, a: MechanismOutput(
        test_id=test_id, mechanism=mechanism, entities=list(read(a) or [])
    )


def _matched(test_id: str, answer: SystemAnswer) -> MechanismOutput:
    matches = [
        PatternMatch(
            kind=m.kind, entities=[m.entity_id], pattern=m.pattern or "", matched_text=m.matched_text or ""
        )
        for m in answer.pattern_matches or []
    ]
    entities = matched_entities(matches)
    return MechanismOutput(test_id=test_id, mechanism=Mechanism.PATTERN, entities=entities, matches=matches)


SEMANTIC = Declared[SemanticTest, SemanticResult](Mechanism.SEMANTIC, 0.60, SemanticResult, "selected")
STATE = Deterministic[StateTest, StateResult](
    Mechanism.STATE,
    0.15,
    StateResult,
    "fired",
    reference=lambda kb, _, tests: _outputs(tests, lambda t: triggered_handlers(t.user_state, kb.entities)),
    reads_kb=True,
    judge=lambda t, o: evaluate_state_test(t, o.entities),
    request=lambda t: _ask(Mechanism.STATE, user_state=t.user_state),
    answered=_loaded(Mechanism.STATE, lambda a: a.triggered_handlers),
    outputs_name="state_activations",
    outputs_doc="Handlers each state test's user state triggers (conditions from the KB's handlers).",
)
PATTERN = Deterministic[PatternTest, PatternResult](
    Mechanism.PATTERN,
    0.15,
    PatternResult,
    "matched",
    reference=lambda _, banks, tests: pattern_outputs(banks.rules, tests),
    reads_kb=False,
    judge=lambda t, o: evaluate_pattern_test(t, o.matches),
    request=lambda t: _ask(Mechanism.PATTERN, message=t.prompt),
    answered=_matched,
    outputs_name="pattern_matches",
    outputs_doc="Crisis patterns and keyword boosts each pattern test's message triggers, and why.",
)
ALWAYS = Deterministic[AlwaysTest, AlwaysResult](
    Mechanism.ALWAYS,
    0.10,
    AlwaysResult,
    "loaded",
    reference=lambda kb, _, tests: _outputs(tests, lambda t: always_loaded(t.user_type, kb.entities)),
    reads_kb=True,
    judge=lambda t, o: evaluate_always_test(t, o.entities),
    request=lambda t: _ask(Mechanism.ALWAYS, user_type=t.user_type, user_state=t.user_state),
    answered=_loaded(Mechanism.ALWAYS, lambda a: a.always_loaded),
    outputs_name="always_loads",
    outputs_doc="Entities always loaded for each always test's user type.",
)
DETERMINISTIC: tuple[Deterministic[Any, Any], ...] = (STATE, PATTERN, ALWAYS)
MECHANISMS: dict[Mechanism, Declared[Any, Any]] = {d.mechanism: d for d in (SEMANTIC, *DETERMINISTIC)}
