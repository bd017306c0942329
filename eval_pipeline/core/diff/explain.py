"""How a change in one test is described: what is compared (the test's expectations, what the
system did per trial) and the lines a reader sees ("selected +x (#2)", "rank a #1 → #3", …).
Volatile fields (tokens, latency, cost, timestamps, raw cosine values) are never compared."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, TypeGuard

from eval_pipeline.core.diff.model import COLLAPSE_ALERT, ReasonDrift
from eval_pipeline.core.mechanisms.pattern import PatternMatch
from eval_pipeline.core.scoring.results import (
    AlwaysResult,
    AnyResult,
    PatternResult,
    ResultBase,
    SemanticResult,
    StateResult,
)
from eval_pipeline.core.scoring.trials import trial_of

# A selected primary whose cosine fell by this much still passes, but no longer for a reason the
# embedding can see (e.g. its content was gutted and a keyword boost kept it in).
SIMILARITY_COLLAPSE = 0.2
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")

View = dict[str, Any]
# What a trial cost and how long it took: recorded, never compared.
VOLATILE = frozenset({"usage", "cost_usd", "latency_ms"})


# What a deterministic test expects, by result type (a semantic test's is its resolved expectations).
_EXPECTED: dict[type[AnyResult], str] = {
    StateResult: "user_state expected_handlers not_expected_handlers",
    PatternResult: "prompt pattern_type is_critical expected_matches expected_secondary not_expected_matches",
    AlwaysResult: "user_type expected_always",
}


def expectation_view(r: AnyResult) -> View:
    """The test's definition and what it expects: a change here is not the system's doing."""
    if isinstance(r, SemanticResult):
        return {"prompt": r.prompt, "source": r.expectation_source, **r.expectations.model_dump(mode="json")}
    return r.model_dump(mode="json", include=set(_EXPECTED[type(r)].split()))


def same_trial(base: AnyResult, head: AnyResult) -> bool:
    """Equal in every field but the volatile ones, so in everything a diff compares: nothing
    to describe (views and lines cost far more than this field-by-field check)."""
    if type(base) is not type(head):
        return False
    theirs = head.__dict__
    return all(value == theirs[name] for name, value in base.__dict__.items() if name not in VOLATILE)


def system_view(r: AnyResult) -> View:
    """What the system did in one trial, without volatile fields."""
    view: View = {"error": r.error}
    if isinstance(r, SemanticResult):
        view["selected"] = [s.entity_id for s in sorted(r.selections, key=lambda s: s.rank)]
        view["candidates"] = [c.entity_id for c in r.candidates]
    elif isinstance(r, StateResult):
        view["handlers"] = r.triggered_handlers
    elif isinstance(r, PatternResult):
        view["pattern match"] = [_match_text(m) for m in r.matches]
    elif isinstance(r, AlwaysResult):
        view["loaded"] = r.loaded_entities
    return view


def _match_text(m: PatternMatch) -> str:
    keyword = f" keyword '{m.keyword}'" if m.keyword else ""
    return f"{', '.join(m.entities)} by {m.kind} /{m.pattern}/{keyword} on '{m.matched_text}'"


def penalty_lines(rows: Sequence[ResultBase]) -> list[str]:
    """Every distinct penalty across the trials, hard fails first ("-10 secondary missing: x")."""
    lines: dict[str, None] = {}
    for r in rows:
        if r.outcome is None:
            continue
        for reason in r.outcome.hard_fail_reasons:
            lines[f"hard fail: {reason}"] = None
        for p in r.outcome.penalties:
            lines[p.text] = None
    return list(lines)


def _reasons(r: AnyResult) -> dict[str, str]:
    if not isinstance(r, SemanticResult):
        return {}
    return {s.entity_id: " ".join(s.reason.split()) for s in r.selections if s.reason}


def fmt(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    return json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)


def _set_lines(label: str, before: Sequence[str], after: Sequence[str]) -> list[str]:
    added = [e for e in after if e not in before]
    removed = [e for e in before if e not in after]
    return [f"{label} +{e}" for e in added] + [f"{label} −{e}" for e in removed]


def _selection_lines(before: Sequence[str], after: Sequence[str]) -> list[str]:
    lines = [f"selected +{e} (#{after.index(e) + 1})" for e in after if e not in before]
    lines += [f"selected −{e} (was #{before.index(e) + 1})" for e in before if e not in after]
    lines += [
        f"rank {e} #{before.index(e) + 1} → #{after.index(e) + 1}"
        for e in after
        if e in before and before.index(e) != after.index(e)
    ]
    return lines


def _candidate_lines(before: Sequence[str], after: Sequence[str]) -> list[str]:
    lines = _set_lines("top 15", before, after)
    if not lines and list(before) != list(after):
        moved = sum(b != a for b, a in zip(before, after, strict=True))
        lines.append(f"top 15 reordered ({moved} places changed)")
    return lines


def field_lines(base: View, head: View) -> list[str]:
    """One line per differing field; ordered entity lists show what changed, not both lists."""
    lines: list[str] = []
    for key in base.keys() | head.keys():
        before, after = base.get(key), head.get(key)
        if before == after:
            continue
        if key == "selected":
            lines += _selection_lines(before or [], after or [])
        elif key == "candidates":
            lines += _candidate_lines(before or [], after or [])
        elif key == "error":
            lines.append(f"errored: {after}" if after else f"no longer errored (was: {before})")
        elif _is_str_list(before) and _is_str_list(after):
            lines += _set_lines(key, before, after) or [f"{key} reordered: {fmt(before)} → {fmt(after)}"]
        else:
            lines.append(f"{key}: {fmt(before)} → {fmt(after)}")
    return sorted(lines, key=_line_order)


def _is_str_list(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


_LINE_ORDER = ("errored:", "no longer errored", "source:", "prompt:", "selected ", "rank ", "top 15 ")


def _line_order(line: str) -> tuple[int, str]:
    """Most telling first: errors, then expectation sources, selections, ranks, candidates."""
    for place, prefix in enumerate(_LINE_ORDER):
        if line.startswith(prefix):
            return place, line
    return len(_LINE_ORDER), line


def per_trial_lines(base: Sequence[AnyResult], head: Sequence[AnyResult]) -> list[str]:
    """System changes trial by trial ("trial 2: …" when a test ran more than once)."""
    several = max(len(base), len(head)) > 1
    lines = [] if len(base) == len(head) else [f"trials {len(base)} → {len(head)}"]
    for b, h in zip(base, head, strict=False):
        prefix = f"trial {trial_of(h)}: " if several else ""
        lines += [prefix + line for line in field_lines(system_view(b), system_view(h))]
    return lines


def reason_drift(base: Sequence[AnyResult], head: Sequence[AnyResult]) -> tuple[list[ReasonDrift], list[str]]:
    """Reasons of an entity selected on both sides that changed, trial by trial: the drift, and
    a cosmetic line for each one in which only numbers moved ("reason numbers x: …")."""
    drift: list[ReasonDrift] = []
    numbers: list[str] = []
    for b, h in zip(base, head, strict=False):
        before, after = _reasons(b), _reasons(h)
        for e, now in after.items():
            was = before.get(e)
            if was is None or was == now:
                continue
            if _NUMBER.sub("#", was) == _NUMBER.sub("#", now):
                numbers.append(f"reason numbers {e}: '{was}' → '{now}'")
            else:
                drift.append(ReasonDrift(entity_id=e, before=was, after=now, trial=trial_of(h)))
    return drift, numbers


def is_cosmetic(line: str) -> bool:
    """A reorder inside the top-15 candidates: the reranker sees the same set either way."""
    return line.split(": ", 1)[-1].startswith("top 15 reordered")


def collapse_alerts(base: Sequence[AnyResult], head: Sequence[AnyResult]) -> list[str]:
    """Selected primaries whose similarity to the query fell by SIMILARITY_COLLAPSE or more."""
    alerts: dict[str, None] = {}
    for b, h in zip(base, head, strict=False):
        if not isinstance(b, SemanticResult) or not isinstance(h, SemanticResult):
            continue
        selected = {s.entity_id for s in h.selections}
        primaries = [e for e in h.expectations.expected_primary if e in selected]
        if not primaries:
            continue
        before = {c.entity_id: c.score for c in b.candidates}
        after = {c.entity_id: c.score for c in h.candidates}
        for e in primaries:
            if e in before and e in after and before[e] - after[e] >= SIMILARITY_COLLAPSE:
                cosine = f"cosine {before[e]:.2f} → {after[e]:.2f}"
                alerts[f"{COLLAPSE_ALERT}: primary {e} still selected, {cosine}"] = None
    return list(alerts)
