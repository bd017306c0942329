"""Opus calibration's proposals: each call's record, its checked proposal, and the history entry.

Each proposal is checked on its own (an invalid one is rejected with its reason; the other tests
go on), then diffed against the resolved expectations; the changed ones become one history file.
One that disagrees with a standing human override is written too: the resolver keeps the override
and reports a conflict for review, so the model's view is on record without overriding a
clinician. Nothing in `core/calibration/` does network I/O: `providers/calibrator.py` calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_pipeline.core.calibration.prompt import LISTS, PROMPT_VERSION
from eval_pipeline.core.errors import CouldNotEvaluate
from eval_pipeline.core.expectations.resolution import ResolvedExpectation, same_expectations
from eval_pipeline.core.inputs.banks import Expectations, RankCheck
from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.history_file import HistoryChange, HistoryFile, Trigger
from eval_pipeline.core.inputs.kb import KnowledgeBase, LoadMode
from eval_pipeline.core.mechanisms.retrieval import Usage

Scope = Literal["full", "affected", "single"]

Mode = Literal["sequential", "batch"]


class CallRecord(FrozenModel):
    """One test's API call: the raw response (kept verbatim for audit) or the error after retries."""

    test_id: str
    custom_id: str | None = None
    usage: Usage = Field(default_factory=Usage)
    response: dict[str, Any] | None = None
    error: str | None = None


class Proposal(FrozenModel):
    test_id: str
    expectations: Expectations
    reasoning: str


class CalibrationOutcome(FrozenModel):
    test_id: str
    status: Literal["proposed", "rejected", "errored"]
    proposal: Proposal | None = None
    reason: str | None = None


class _RawProposal(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    reasoning: str
    expected_primary: list[str]
    expected_secondary: list[str]
    not_expected: list[str]
    rank_check: list[RankCheck]


class NoAnswer(CouldNotEvaluate):
    """The response holds no answer to parse (truncated, refused, or no text block)."""


_STOPS: dict[object, str] = {"max_tokens": "output truncated at max_tokens", "refusal": "the model refused"}


def response_text(response: Mapping[str, Any]) -> str:
    """The answer's JSON text. Thinking blocks, when present, come before the text block."""
    stopped = _STOPS.get(response.get("stop_reason"))
    if stopped:
        raise NoAnswer(stopped)
    texts = [b.get("text") for b in response.get("content", []) if b.get("type") == "text"]
    texts = [t for t in texts if isinstance(t, str) and t.strip()]
    if not texts:
        raise NoAnswer("no text in the response")
    return str(texts[-1])


def proposal_problems(raw: _RawProposal, kb: KnowledgeBase) -> list[str]:
    """Why a well-formed proposal is unusable; empty when it is fine."""
    problems: list[str] = []
    if not raw.expected_primary:
        problems.append("expected_primary is empty")
    seen: dict[str, str] = {}
    for name in LISTS:
        for eid in getattr(raw, name):
            entity = kb.by_id.get(eid)
            if entity is None:
                problems.append(f"unknown entity '{eid}' in {name}")
            elif entity.load_mode is not LoadMode.SEMANTIC:
                problems.append(f"'{eid}' in {name} is {entity.load_mode.value}, not SEMANTIC")
            if eid in seen:
                problems.append(f"'{eid}' is in both {seen[eid]} and {name}")
            seen.setdefault(eid, name)
    wanted = {*raw.expected_primary, *raw.expected_secondary}
    for rc in raw.rank_check:
        if rc.higher == rc.lower:
            problems.append(f"rank_check ranks '{rc.higher}' against itself")
        for eid in (rc.higher, rc.lower):
            if eid not in wanted:
                problems.append(f"rank_check names '{eid}', which is not expected")
    return list(dict.fromkeys(problems))


def parse_proposal(test_id: str, text: str, kb: KnowledgeBase) -> Proposal | str:
    """The proposal, or the reason it is rejected."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return f"output is not valid JSON ({exc.msg} at char {exc.pos})"
    try:
        raw = _RawProposal.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "output"
        return f"output does not match the schema ({where}: {first['msg']})"
    problems = proposal_problems(raw, kb)
    if problems:
        return "; ".join(problems)
    expectations = Expectations(**{name: getattr(raw, name) for name in (*LISTS, "rank_check")})
    return Proposal(test_id=test_id, expectations=expectations, reasoning=raw.reasoning.strip())


def interpret(call: CallRecord, kb: KnowledgeBase) -> CalibrationOutcome:
    if call.response is None:
        return CalibrationOutcome(test_id=call.test_id, status="errored", reason=call.error or "no response")
    try:
        parsed = parse_proposal(call.test_id, response_text(call.response), kb)
    except NoAnswer as exc:
        parsed = str(exc)
    if isinstance(parsed, Proposal):
        return CalibrationOutcome(test_id=call.test_id, status="proposed", proposal=parsed)
    return CalibrationOutcome(test_id=call.test_id, status="rejected", reason=parsed)


def judge(
    calls: Sequence[CallRecord], kb: KnowledgeBase, resolved: Mapping[str, ResolvedExpectation]
) -> tuple[list[CalibrationOutcome], list[ProposalDiff]]:
    """Every call's outcome, and the valid proposals diffed against the expectations in force."""
    outcomes = [interpret(c, kb) for c in calls]
    return outcomes, diff_proposals([o.proposal for o in outcomes if o.proposal is not None], resolved)


class ProposalDiff(FrozenModel):
    test_id: str
    previous: Expectations
    previous_source: str
    proposed: Expectations
    reasoning: str
    changed: bool
    conflict: bool = Field(description="Changed while a human override stands: recorded, not applied")
    clears_conflict: bool = Field(
        default=False, description="Agrees with a standing override a past calibration disagreed with"
    )

    @property
    def recorded(self) -> bool:
        """Written to history: a change, or an agreement that clears a flagged conflict."""
        return self.changed or self.clears_conflict


def diff_proposals(
    proposals: Iterable[Proposal], resolved: Mapping[str, ResolvedExpectation]
) -> list[ProposalDiff]:
    out = []
    for p in proposals:
        current = resolved[p.test_id]
        changed = not same_expectations(current.expectations, p.expectations)
        out.append(
            ProposalDiff(
                test_id=p.test_id,
                previous=current.expectations,
                previous_source=current.source,
                proposed=p.expectations,
                reasoning=p.reasoning,
                changed=changed,
                conflict=changed and current.source_kind == "human_override",
                clears_conflict=not changed and current.conflict is not None,
            )
        )
    return out


def build_history(
    diffs: Sequence[ProposalDiff], *, version: datetime, trigger: Trigger, kb: KnowledgeBase, model: str
) -> HistoryFile:
    """Changed proposals become changes (conflicting ones included, see the module docstring), and
    so do agreements with a standing override whose conflict they clear: without them the flag
    would outlive the disagreement."""
    changes = [
        HistoryChange(test_id=d.test_id, previous=d.previous, updated=d.proposed, opus_reasoning=d.reasoning)
        for d in diffs
        if d.recorded
    ]
    return HistoryFile(
        version=version,
        calibration_trigger=trigger,
        kb_version=kb.kb_version,
        kb_hash=kb.content_hash,
        model=model,
        prompt_version=PROMPT_VERSION,
        changes=changes,
        changed_count=len(changes),
        unchanged_count=len(diffs) - len(changes),
    )


# The history trigger a calibration records when its caller names none.
DEFAULT_TRIGGERS: dict[Scope, Trigger] = {"full": "full", "single": "manual", "affected": "kb_entity_added"}
