"""Which tests a run covers (a `Scope`: banks, test ids, topic, so the CLI's filters and the
Dagster assets select tests the same way), what a mechanism loaded for a test, and how semantic
retrievals score (the other mechanisms: `registry`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TypeVar

from pydantic import Field

from eval_pipeline.core.expectations.resolution import ResolvedExpectation
from eval_pipeline.core.inputs.banks import AnyTest, Mechanism, SemanticTest
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.loading import Banks
from eval_pipeline.core.mechanisms.pattern import PatternMatch
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.scoring.results import SemanticResult
from eval_pipeline.core.scoring.semantic import evaluate_semantic_test
from eval_pipeline.core.suggest import did_you_mean

T = TypeVar("T", bound=AnyTest)
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")


class Scope(FrozenModel):
    """Which tests a run covers. Empty `test_ids` and no `topic` mean every test of the banks."""

    banks: frozenset[Mechanism] = Field(default_factory=lambda: frozenset(Mechanism))
    test_ids: frozenset[str] = frozenset()
    topic: str | None = None

    def runs(self, mechanism: Mechanism) -> bool:
        if mechanism not in self.banks:
            return False
        # A topic filter only narrows semantic tests (the other banks have no topics).
        return self.topic is None or mechanism is Mechanism.SEMANTIC or bool(self.test_ids)

    @property
    def is_full(self) -> bool:
        """Every test of every bank: the canonical evaluation, the only kind that is a baseline."""
        return self.banks == frozenset(Mechanism) and not self.test_ids and self.topic is None

    @property
    def label(self) -> str:
        """A file-name-safe name for a narrowed scope ("full" for the whole evaluation)."""
        if self.is_full:
            return "full"
        parts = ["banks-" + "+".join(m.value for m in Mechanism if m in self.banks)]
        parts += [f"topic-{self.topic}"] if self.topic is not None else []
        parts += ["tests-" + "+".join(sorted(self.test_ids))] if self.test_ids else []
        return _UNSAFE.sub("_", "__".join(parts))[:120]

    def select(self, mechanism: Mechanism, tests: Sequence[T]) -> list[T]:
        if not self.runs(mechanism):
            return []
        chosen = [t for t in tests if not self.test_ids or t.test_id in self.test_ids]
        if self.topic is not None and mechanism is Mechanism.SEMANTIC:
            chosen = [t for t in chosen if isinstance(t, SemanticTest) and self.topic in t.topics]
        return chosen


def scope_problems(scope: Scope, banks: Banks) -> list[str]:
    """Why a narrowed scope is a mistake: unknown topic or test ids, or nothing selected at all."""
    topics = {topic for t in banks.semantic_tests for topic in t.topics}
    problems = []
    if scope.topic is not None and scope.topic not in topics:
        known = ", ".join(sorted(topics)) or "none"
        hint = did_you_mean(scope.topic, topics)
        problems.append(f"--topic: unknown topic '{scope.topic}'{hint or f' (known: {known})'}")
    unknown = sorted(scope.test_ids - banks.test_ids())
    if unknown:
        hint = did_you_mean(unknown[0], banks.test_ids()) if len(unknown) == 1 else ""
        problems.append(f"--test: unknown test id(s) {', '.join(unknown)}{hint}")
    selected = [len(scope.select(m, banks.tests(m))) for m in Mechanism]
    if not problems and not any(selected):
        problems.append("the selection (--banks, --test, --topic) matches no test")
    return problems


class MechanismOutput(FrozenModel):
    """What a mechanism (built in, or the team's system) loaded for one test, before any judging."""

    test_id: str
    mechanism: Mechanism | None = None  # set when one table holds several mechanisms' outputs
    entities: list[str]
    matches: list[PatternMatch] = Field(default_factory=list)
    # The mechanism could not finish for this test (a regex timed out, the system failed or broke
    # the contract): the test is errored with this reason.
    error: str | None = None


def score_semantic(
    tests: Sequence[SemanticTest],
    resolved: Mapping[str, ResolvedExpectation],
    retrievals: Sequence[SemanticRetrieval],
) -> list[SemanticResult]:
    """Score each retrieval (every trial) against the test's resolved expectations."""
    by_id = {t.test_id: t for t in tests}
    return [
        evaluate_semantic_test(by_id[r.test_id], resolved[r.test_id], r)
        for r in retrievals
        if r.test_id in by_id
    ]


def new_hard_fails(current: Sequence[SemanticResult], previous: Sequence[SemanticResult]) -> list[str]:
    """Tests that hard-fail now but did not in the previous run."""
    before = {r.test_id for r in previous if r.hard_fail}
    return sorted({r.test_id for r in current if r.hard_fail} - before)
