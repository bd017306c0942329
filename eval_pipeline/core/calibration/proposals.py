"""Opus calibration, the pure part: prompt, output schema, proposal checks, diff, history entry, scope.

A calibrator model reads the whole KB (a cached prompt prefix, identical for every test) and, per
semantic test, the user message and the expectations in force today, and proposes new expectations
as one JSON object. Each proposal is checked on its own: an invalid one is rejected with its reason
and the other tests go on. Valid proposals are diffed against the resolved expectations; the
changed ones become one history file. A proposal that disagrees with a standing human override is
written too — the resolver keeps the override in force and reports the calibration as a conflict
for review, so the model's view is on record without overriding a clinician.

Nothing here does network I/O or imports the SDK; `providers/calibrator.py` makes the calls and
`calibration_files.py` writes the results.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_pipeline.core.expectations.history import HistoryChange, HistoryFile, Trigger
from eval_pipeline.core.expectations.resolution import ResolvedExpectation, same_expectations, source_kind
from eval_pipeline.core.inputs.banks import Expectations, RankCheck, SemanticTest
from eval_pipeline.core.inputs.kb import KnowledgeBase, LoadMode
from eval_pipeline.core.mechanisms.retrieval import SELECTION_K, Usage
from eval_pipeline.core.report.run_document import RunDocument

PROMPT_VERSION = "calibrate-v1"
Scope = Literal["full", "affected", "single"]
Mode = Literal["sequential", "batch"]
LISTS = ("expected_primary", "expected_secondary", "not_expected")

SYSTEM_INSTRUCTIONS = f"""\
You calibrate the expected results of retrieval tests for a conversational assistant. The \
assistant answers users with the help of a knowledge base (KB); for each user message a retrieval \
system loads at most {SELECTION_K} KB entities into the assistant's context. A test states which \
entities that retrieval should and should not load for one user message.

The full KB follows. Each request then gives you one test: its user message, its category and \
topics, and the expectations currently recorded for it. Judge from the KB content which entities a \
good retrieval must load for that message and propose the test's expectations:
- expected_primary: the entities the answer cannot do without (usually one, rarely more than two).
- expected_secondary: entities that clearly help but are not essential.
- not_expected: entities that would be wrong or harmful to load for this message and that a \
retriever might plausibly pick (for example crisis content for an ordinary complaint).
- rank_check: pairs where `higher` should rank above `lower` when both are loaded; both must be in \
expected_primary or expected_secondary. Use an empty list when order does not matter.
- reasoning: two or three sentences on what you kept, what you changed and why.

Rules:
- Name only entities whose load_mode is SEMANTIC, copying each entity id exactly.
- An entity may appear in only one of expected_primary, expected_secondary and not_expected.
- expected_primary and expected_secondary together should fit in {SELECTION_K} entities.
- Keep the current expectations where they are still right; change them only where the KB now \
supports a better answer.
- Answer with the JSON object only.
"""

_ID_LIST: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
# Structured output (output_config.format). Reasoning comes first so the lists follow from it.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "expected_primary": _ID_LIST,
        "expected_secondary": _ID_LIST,
        "not_expected": _ID_LIST,
        "rank_check": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"higher": {"type": "string"}, "lower": {"type": "string"}},
                "required": ["higher", "lower"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["reasoning", *LISTS, "rank_check"],
    "additionalProperties": False,
}


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- prompt -------------------------------------------------------------------------------------


def kb_text(kb: KnowledgeBase) -> str:
    """Every entity, sorted by id so the cached prefix does not depend on file order."""
    parts = [f'<knowledge_base version="{kb.kb_version}" entities="{len(kb.entities)}">']
    for e in sorted(kb.entities, key=lambda e: e.entity_id):
        parts.append(
            f'<entity id="{e.entity_id}" type="{e.entity_type.value}" load_mode="{e.load_mode.value}">\n'
            f"<title>{e.title}</title>\n<summary>{e.summary}</summary>\n"
            f"<content>\n{e.content.strip()}\n</content>\n</entity>"
        )
    parts.append("</knowledge_base>")
    return "\n".join(parts)


def user_turn(test: SemanticTest, current: ResolvedExpectation) -> str:
    """The per-test user turn: after the cache breakpoint, so it never invalidates the KB prefix."""
    state = (
        f"\n<user_state>{json.dumps(test.user_state, sort_keys=True)}</user_state>" if test.user_state else ""
    )
    expectations = current.expectations.model_dump_json()
    return (
        f'<test id="{test.test_id}" category="{test.category}" topics="{", ".join(test.topics)}">\n'
        f"<user_message>\n{test.prompt}\n</user_message>{state}\n"
        f'<current_expectations source="{source_kind(current.source)}">\n{expectations}\n'
        "</current_expectations>\n</test>\n"
        "Propose this test's expectations."
    )


# --- one call's record and its interpretation -------------------------------------------------------


class CallRecord(_Frozen):
    """One test's API call: the raw response (kept verbatim for audit) or the error after retries."""

    test_id: str
    custom_id: str | None = None
    usage: Usage = Field(default_factory=Usage)
    response: dict[str, Any] | None = None
    error: str | None = None


class Proposal(_Frozen):
    test_id: str
    expectations: Expectations
    reasoning: str


class TestOutcome(_Frozen):
    __test__ = False  # not a pytest test class despite the name

    test_id: str
    status: Literal["proposed", "rejected", "errored"]
    proposal: Proposal | None = None
    reason: str | None = None


class _RawProposal(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reasoning: str
    expected_primary: list[str]
    expected_secondary: list[str]
    not_expected: list[str]
    rank_check: list[RankCheck]


class NoAnswer(Exception):
    """The response holds no answer to parse (truncated, refused, or no text block)."""


def response_text(response: Mapping[str, Any]) -> str:
    """The answer's JSON text. Thinking blocks, when present, come before the text block."""
    stop = response.get("stop_reason")
    if stop == "max_tokens":
        raise NoAnswer("output truncated at max_tokens")
    if stop == "refusal":
        raise NoAnswer("the model refused")
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
    expectations = Expectations(
        expected_primary=raw.expected_primary,
        expected_secondary=raw.expected_secondary,
        not_expected=raw.not_expected,
        rank_check=raw.rank_check,
    )
    return Proposal(test_id=test_id, expectations=expectations, reasoning=raw.reasoning.strip())


def interpret(call: CallRecord, kb: KnowledgeBase) -> TestOutcome:
    if call.response is None:
        return TestOutcome(test_id=call.test_id, status="errored", reason=call.error or "no response")
    try:
        parsed = parse_proposal(call.test_id, response_text(call.response), kb)
    except NoAnswer as exc:
        parsed = str(exc)
    if isinstance(parsed, Proposal):
        return TestOutcome(test_id=call.test_id, status="proposed", proposal=parsed)
    return TestOutcome(test_id=call.test_id, status="rejected", reason=parsed)


def judge(
    calls: Sequence[CallRecord], kb: KnowledgeBase, resolved: Mapping[str, ResolvedExpectation]
) -> tuple[list[TestOutcome], list[ProposalDiff]]:
    """Every call's outcome, and the valid proposals diffed against the expectations in force."""
    outcomes = [interpret(c, kb) for c in calls]
    return outcomes, diff_proposals([o.proposal for o in outcomes if o.proposal is not None], resolved)


# --- diff and history ---------------------------------------------------------------------------------


class ProposalDiff(_Frozen):
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
    diffs: Sequence[ProposalDiff],
    *,
    version: datetime,
    trigger: Trigger,
    kb: KnowledgeBase,
    model: str,
    prompt_version: str = PROMPT_VERSION,
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
        prompt_version=prompt_version,
        changes=changes,
        changed_count=len(changes),
        unchanged_count=len(diffs) - len(changes),
    )


# The history trigger a calibration records when its caller names none.
DEFAULT_TRIGGERS: dict[Scope, Trigger] = {"full": "full", "single": "manual", "affected": "kb_entity_added"}


# --- scope ----------------------------------------------------------------------------------------------


def retrieved_entities(documents: Iterable[RunDocument]) -> dict[str, set[str]]:
    """Per test id: every entity any of these runs had among its candidates or selections."""
    out: dict[str, set[str]] = {}
    for doc in documents:
        for result in doc.semantic:
            ids = {c.entity_id for c in result.candidates} | {s.entity_id for s in result.selections}
            out.setdefault(result.test_id, set()).update(ids)
    return out


def affected_tests(
    tests: Sequence[SemanticTest],
    resolved: Mapping[str, ResolvedExpectation],
    kb: KnowledgeBase,
    entity_ids: Iterable[str],
    retrieved: Mapping[str, set[str]],
) -> dict[str, list[str]]:
    """The tests an added or changed entity may affect, each with why (docs/calibration.md).

    A test is affected when its resolved expectations name one of the entities, when its latest
    retrieval (candidates or selections) contained one, or when its topics share a topic with one.
    """
    wanted = set(entity_ids)
    topics = {t for eid in wanted if eid in kb.by_id for t in kb.by_id[eid].topics}
    out: dict[str, list[str]] = {}
    for test in tests:
        reasons = []
        named = sorted(wanted & resolved[test.test_id].expectations.entity_ids())
        if named:
            reasons.append(f"expectations name {', '.join(named)}")
        seen = sorted(wanted & retrieved.get(test.test_id, set()))
        if seen:
            reasons.append(f"last retrieval had {', '.join(seen)}")
        shared = sorted(topics & set(test.topics))
        if shared:
            reasons.append(f"topic {', '.join(shared)}")
        if reasons:
            out[test.test_id] = reasons
    return out


class ScopeError(ValueError):
    """The requested scope names unknown tests or entities, or lacks what it needs (one line)."""


def scoped_tests(
    scope: Scope,
    tests: Sequence[SemanticTest],
    kb: KnowledgeBase,
    resolved: Mapping[str, ResolvedExpectation],
    test_ids: Sequence[str] = (),
    added_entities: Sequence[str] = (),
    retrieved: Mapping[str, set[str]] | None = None,
) -> tuple[list[SemanticTest], dict[str, list[str]]]:
    """The tests a calibration covers, in bank order, and for `affected` why each is included."""
    if test_ids and scope != "single":
        raise ScopeError("test ids go with the single scope")
    if added_entities and scope != "affected":
        raise ScopeError("added entities go with the affected scope")
    if scope == "full":
        return list(tests), {}
    if scope == "single":
        unknown = sorted(set(test_ids) - {t.test_id for t in tests})
        if not test_ids or unknown:
            raise ScopeError(f"the single scope needs known test ids (unknown: {', '.join(unknown) or '-'})")
        return [t for t in tests if t.test_id in set(test_ids)], {}
    unknown = sorted(set(added_entities) - set(kb.by_id))
    if not added_entities or unknown:
        raise ScopeError(f"the affected scope needs KB entity ids (unknown: {', '.join(unknown) or '-'})")
    why = affected_tests(tests, resolved, kb, added_entities, retrieved or {})
    return [t for t in tests if t.test_id in why], why


def cache_read_coverage(calls: Sequence[CallRecord], prefix_tokens: int) -> list[float]:
    """Share of the KB prefix read from cache by every answered call after the first."""
    answered = [c for c in calls if c.response is not None]
    if prefix_tokens <= 0:
        return []
    return [c.usage.cache_read_input_tokens / prefix_tokens for c in answered[1:]]


# --- what an applied calibration leaves behind ---------------------------------------------------------


class Rejected(_Frozen):
    test_id: str
    status: Literal["rejected", "errored"]
    reason: str


class CalibrationRecord(_Frozen):
    """One line of calibration/calibration_log.json: an applied calibration, what it cost."""

    calibration_id: str
    started_at: datetime
    duration_s: float
    scope: Scope
    trigger: Trigger
    test_ids: list[str]
    added_entities: list[str] = Field(default_factory=list)
    model: str
    prompt_version: str
    kb_version: str
    kb_hash: str
    mode: Mode
    changed: int
    unchanged: int
    conflicts: list[str] = Field(default_factory=list, description="Changed tests with a standing override")
    rejected: list[Rejected] = Field(default_factory=list)
    usage: Usage
    cost_usd: float = Field(description="Calibration cost: never part of the system-under-test cost")
    kb_prefix_tokens: int
    min_cache_read_coverage: float | None = None
    # Filled in as the files are written (calibration_files.apply_calibration, or apply_review
    # for a reviewed dry run, whose raw responses live in its review file).
    history_file: str | None = None
    response_file: str | None = None
    reviewed_by: str | None = None


class CalibrationLog(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1
    records: list[CalibrationRecord] = Field(default_factory=list)

    def cost_by_date(self) -> dict[str, float]:
        """Calibration spend per UTC start date, for reports that show costs."""
        out: dict[str, float] = {}
        for r in self.records:
            day = r.started_at.date().isoformat()
            out[day] = out.get(day, 0.0) + r.cost_usd
        return out


class ResponseFile(_Frozen):
    """calibration/opus_responses/calibration_<timestamp>.json: every raw response, verbatim."""

    calibration_id: str
    model: str
    prompt_version: str
    kb_hash: str
    mode: Mode
    calls: list[CallRecord]


class CalibrationRun(BaseModel):
    """One finished calibration: the calls, what they mean, and the files it would write."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scope: Scope
    trigger: Trigger
    added_entities: list[str] = Field(default_factory=list)
    model: str
    mode: Mode
    kb: KnowledgeBase
    started: datetime
    duration_s: float
    prefix_tokens: int
    calls: list[CallRecord]
    outcomes: list[TestOutcome]
    diffs: list[ProposalDiff]
    cost_usd: float

    @property
    def calibration_id(self) -> str:
        """A file-name-safe UTC timestamp, e.g. 2026-11-22T14-30-05Z."""
        return self.started.strftime("%Y-%m-%dT%H-%M-%SZ")

    @property
    def usage(self) -> Usage:
        return sum((c.usage for c in self.calls), Usage())

    @property
    def coverage(self) -> list[float]:
        return cache_read_coverage(self.calls, self.prefix_tokens)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def changed(self) -> list[ProposalDiff]:
        return [d for d in self.diffs if d.changed]

    def history(self) -> HistoryFile | None:
        """None when no test got a valid proposal: there is nothing to resolve from."""
        if not self.diffs:
            return None
        return build_history(
            self.diffs, version=self.started, trigger=self.trigger, kb=self.kb, model=self.model
        )

    def record(self) -> CalibrationRecord:
        coverage = self.coverage
        return CalibrationRecord(
            calibration_id=self.calibration_id,
            started_at=self.started,
            duration_s=round(self.duration_s, 3),
            scope=self.scope,
            trigger=self.trigger,
            test_ids=[c.test_id for c in self.calls],
            added_entities=self.added_entities,
            model=self.model,
            prompt_version=PROMPT_VERSION,
            kb_version=self.kb.kb_version,
            kb_hash=self.kb.content_hash,
            mode=self.mode,
            changed=len(self.changed),
            unchanged=len(self.diffs) - len(self.changed),
            conflicts=[d.test_id for d in self.diffs if d.conflict],
            rejected=[
                Rejected(test_id=o.test_id, status=o.status, reason=o.reason or "")
                for o in self.outcomes
                if o.status != "proposed"
            ],
            usage=self.usage,
            cost_usd=round(self.cost_usd, 6),
            kb_prefix_tokens=self.prefix_tokens,
            min_cache_read_coverage=round(min(coverage), 4) if coverage else None,
        )

    def responses(self) -> ResponseFile:
        return ResponseFile(
            calibration_id=self.calibration_id,
            model=self.model,
            prompt_version=PROMPT_VERSION,
            kb_hash=self.kb.content_hash,
            mode=self.mode,
            calls=self.calls,
        )
