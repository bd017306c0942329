"""One test in full, as the HTML report shows it when a row is opened: what it expected, what the
system selected or fired (and, for semantic tests, the candidates it chose from), how it scored
and why, trial by trial; an errored trial shows its error and no score."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from eval_pipeline.core.rounding import fmt_score
from eval_pipeline.core.scoring.results import (
    AlwaysResult,
    AnyResult,
    PatternResult,
    ResultBase,
    ResultStatus,
    SemanticResult,
    StateResult,
)
from eval_pipeline.core.scoring.trials import by_test


@dataclass(frozen=True)
class DetailTable:
    title: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]


@dataclass(frozen=True)
class TrialDetail:
    """One trial of a test (most tests have one)."""

    heading: str
    errored: bool
    fields: list[tuple[str, str]]
    tables: list[DetailTable] = field(default_factory=list)


def _ids(values: Sequence[str]) -> str:
    return ", ".join(values) or "—"


def _outcome(r: ResultBase) -> list[tuple[str, str]]:
    if r.status is ResultStatus.ERRORED or r.outcome is None:
        return [("Status", "errored (not scored)"), ("Error", r.error or "no reason recorded")]
    o = r.outcome
    rows = [("Score", f"{o.score} ({o.label})")]
    rows += [("Missing primary", _ids(o.missing_primary))] if o.missing_primary else []
    rows += [("Relevance", "; ".join(o.relevance_fails))] if o.relevance_fails else []
    return [*rows, ("Penalties", "; ".join(p.text for p in o.penalties) or "none")]


def _semantic(r: SemanticResult) -> tuple[list[tuple[str, str]], list[DetailTable]]:
    e = r.expectations
    fields = [
        ("Prompt", r.prompt),
        ("Category / topics", f"{r.category} / {_ids(r.topics)}"),
        ("Expected primary", _ids(e.expected_primary)),
    ]
    fields += [("Any of", _ids(e.expected_any))] if e.expected_any else []
    fields += [("Graded", _ids([f"{k}={v}" for k, v in e.relevant.items()]))] if e.relevant else []
    fields += [
        ("Expected secondary", _ids(e.expected_secondary)),
        ("Not expected", _ids(e.not_expected)),
        ("Rank checks", _ids([f"{c.higher} above {c.lower}" for c in e.rank_check])),
        ("Expectation source", r.expectation_source),
    ]
    mark = {
        **{x: f"gain {g}" for x, g in e.relevant.items()},
        **{x: "secondary" for x in e.expected_secondary},
        **{x: "primary" for x in [*e.expected_primary, *e.expected_any]},
        **{x: "not expected" for x in e.not_expected},
    }
    selections = DetailTable(
        "Selections (final ranking)",
        ("Rank", "Entity", "", "Reason"),
        [(str(s.rank), s.entity_id, mark.get(s.entity_id, ""), s.reason or "") for s in r.selections],
    )
    candidates = DetailTable(
        "Candidates (embedding stage)",
        ("#", "Entity", "", "Cosine"),
        [
            (str(i), c.entity_id, mark.get(c.entity_id, ""), f"{c.score:.3f}")
            for i, c in enumerate(r.candidates, 1)
        ],
    )
    return fields, [t for t in (selections, candidates) if t.rows]


def _state(r: StateResult) -> list[tuple[str, str]]:
    return [
        ("User state", _ids([f"{k}={v}" for k, v in r.user_state.items()])),
        ("Expected handlers", _ids(r.expected_handlers)),
        ("Not expected", _ids(r.not_expected_handlers)),
        ("Fired", _ids(r.triggered_handlers)),
        ("Missing", _ids(r.missing_handlers)),
        ("Wrong", _ids(r.wrong_handlers)),
    ]


def _pattern(r: PatternResult) -> tuple[list[tuple[str, str]], list[DetailTable]]:
    fields = [
        ("Prompt", r.prompt),
        ("Type", f"{r.pattern_type.value}{' (critical)' if r.is_critical else ''}"),
        ("Expected matches", _ids(r.expected_matches)),
        ("Expected secondary", _ids(r.expected_secondary)),
        ("Not expected", _ids(r.not_expected_matches)),
        ("Matched", _ids(r.matched_entities)),
    ]
    fields += [("Critical failure", r.critical_reason or "yes")] if r.critical_failure else []
    matches = DetailTable(
        "Rules that matched",
        ("Kind", "Pattern", "Matched text", "Entities"),
        [(m.kind, m.pattern, m.matched_text, _ids(m.entities)) for m in r.matches],
    )
    return fields, [matches] if matches.rows else []


def _always(r: AlwaysResult) -> list[tuple[str, str]]:
    return [
        ("User type", r.user_type),
        ("Expected always", _ids(r.expected_always)),
        ("Loaded", _ids(r.loaded_entities)),
        ("Missing", _ids(r.missing)),
    ]


def _trial(r: AnyResult, heading: str) -> TrialDetail:
    tables: list[DetailTable] = []
    if isinstance(r, SemanticResult):
        fields, tables = _semantic(r)
    elif isinstance(r, PatternResult):
        fields, tables = _pattern(r)
    else:
        fields = _state(r) if isinstance(r, StateResult) else _always(r)
    errored = r.status is ResultStatus.ERRORED
    return TrialDetail(heading, errored, [*_outcome(r), *fields], tables)


def details_by_test(rows: Sequence[AnyResult], threshold: int) -> dict[str, list[TrialDetail]]:
    """Every test of one bank by id, each trial in full."""
    details = {}
    for t in by_test(rows, threshold):
        if t.trials == 1:
            details[t.test_id] = [_trial(t.first, t.first.name or t.test_id)]
        else:
            mean = f"mean {fmt_score(t.score)} over {t.trials} trials"
            details[t.test_id] = [
                _trial(r, f"{r.name or t.test_id}: trial {i} ({mean})") for i, r in enumerate(t.rows, 1)
            ]
    return details
