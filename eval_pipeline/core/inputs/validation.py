"""Cross-checks between the KB, the banks, the rules and the history: the problems only visible
across files (schema problems are found while loading), such as unknown entities or ones in the
wrong load mode, duplicate ids, unsafe regexes, contradictions and values outside a vocabulary.

Warnings are what is legal but probably not meant: a check that can never fire for the built-in
models, a user type no entity serves, history dated in the future. They print; they never fail.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from eval_pipeline.core.inputs.banks import Expectations, PatternType, SemanticTest
from eval_pipeline.core.inputs.kb import FieldCondition, KnowledgeBase, LoadMode
from eval_pipeline.core.inputs.kb_cache import KbCache, Loaded
from eval_pipeline.core.inputs.loading import (
    Banks,
    InputError,
    Problem,
    entity_folder_warnings,
    load_banks,
    load_history,
    load_kb,
    unread_entities,
)
from eval_pipeline.core.inputs.regex_safety import backtracking_risk

# Which load modes each reference may name. Keyword boosts point at SEMANTIC entities; crisis
# rules may load PATTERN entities or semantic safety content alongside them.
SEMANTIC_MODES = frozenset({LoadMode.SEMANTIC})
PATTERN_MODES = frozenset({LoadMode.PATTERN, LoadMode.SEMANTIC})
STATE_MODES = frozenset({LoadMode.STATE})
ALWAYS_MODES = frozenset({LoadMode.ALWAYS})
# Each role an entity can play in a semantic test.
_ROLES = ("expected_primary", "expected_any", "relevant", "expected_secondary", "not_expected")
_SHOWN_PATTERN = 80  # characters of a crisis pattern a problem line shows
_VACUOUS = (
    "the built-in models never select it, so this check is vacuous for them "
    "(an external system under test may select it)"
)


class _Checker:
    def __init__(self, kb: KnowledgeBase | None, banks: Banks, broken: frozenset[str], now: datetime) -> None:
        self.kb = kb
        self.banks = banks
        self.broken = broken  # entities that failed their own validation: don't re-report
        self.now = now
        self.problems: list[Problem] = []
        self.unchecked = 0  # references to a broken entity, counted instead of reported
        self.warnings: list[Problem] = []
        # Per set of load modes, the ids of the entities in one of them: a bank holds thousands of
        # references, and each one that fits is then one set lookup.
        self._fitting: dict[frozenset[LoadMode], frozenset[str]] = {}

    def add(self, file: str, item: str, fld: str, message: str) -> None:
        self.problems.append(Problem(file, item, fld, message))

    def warn(self, file: str, item: str, fld: str, message: str) -> None:
        self.warnings.append(Problem(file, item, fld, message))

    def refs(self, file: str, item: str, fld: str, ids: Iterable[str], modes: frozenset[LoadMode]) -> None:
        if self.kb is None:
            return  # the KB's own problems are already reported
        fitting = self._fitting.get(modes)
        if fitting is None:
            fitting = frozenset(eid for eid, e in self.kb.by_id.items() if e.load_mode in modes)
            self._fitting[modes] = fitting
        for eid in ids:
            if eid in fitting:
                continue
            if eid in self.broken:
                self.unchecked += 1
                continue
            entity = self.kb.by_id.get(eid)
            if entity is None:
                self.add(file, item, fld, f"unknown entity '{eid}'")
            elif fld.endswith("not_expected"):  # of a mode outside `modes`, or it would fit
                # Legal (the specification's own bank does it), but no built-in model can fail it.
                self.warn(file, item, fld, f"'{eid}' is {entity.load_mode.value}: {_VACUOUS}")
            else:
                needs = "this field needs " + "/".join(sorted(m.value for m in modes))
                self.add(file, item, fld, f"entity '{eid}' is {entity.load_mode.value}, {needs}")

    def path(self, rel: str) -> str:
        return str(self.banks.root / rel)


def _check_kb(c: _Checker, kb_path: Path) -> None:
    if c.kb is None:
        return
    file = str(kb_path)
    counts = Counter(e.entity_id for e in c.kb.entities)
    for eid, n in counts.items():
        if n > 1:
            c.add(file, eid, "entity_id", f"duplicate entity id ({n} times)")
    for e in c.kb.entities:
        if e.load_mode is LoadMode.STATE and not e.state_conditions:
            c.add(file, e.entity_id, "state_conditions", "STATE entity has no conditions")
        if e.state_conditions and e.load_mode is not LoadMode.STATE:
            c.add(file, e.entity_id, "state_conditions", "only STATE entities use conditions")
        for fld, cond in e.state_conditions.items():
            for op, value in cond.items():
                if op == "in" and not isinstance(value, list):
                    c.add(file, e.entity_id, f"state_conditions.{fld}.in", "needs a list")
                if op in ("gte", "lte") and _number(value) is None:
                    c.add(file, e.entity_id, f"state_conditions.{fld}.{op}", "needs a number")
            impossible = unsatisfiable(cond)
            if impossible:
                c.add(file, e.entity_id, f"state_conditions.{fld}", impossible)
        _check_vocabulary(c, file, e.entity_id, "topics", e.topics, c.kb.vocabulary.topics)
        _check_vocabulary(c, file, e.entity_id, "user_types", e.user_types, c.kb.vocabulary.user_types)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def unsatisfiable(cond: FieldCondition) -> str | None:
    """Why no value can meet one field's conditions (`gte: 10` with `lte: 3`), or None."""
    low, high, eq = _number(cond.get("gte")), _number(cond.get("lte")), cond.get("eq")
    if low is not None and high is not None and low > high:
        return f"no value is both >= {cond['gte']} and <= {cond['lte']}"
    choices = cond.get("in")
    if isinstance(choices, list) and not choices:
        return "'in' an empty list matches nothing"
    if "eq" in cond and isinstance(choices, list) and eq not in choices:
        return f"eq {eq!r} is not in {choices!r}"
    value = _number(eq)
    if value is not None and ((low is not None and value < low) or (high is not None and value > high)):
        return f"eq {eq!r} is outside the gte/lte range"
    return None


def _check_vocabulary(
    c: _Checker, file: str, item: str, fld: str, values: Iterable[str], declared: list[str] | None
) -> None:
    for value in values:
        if declared is not None and value not in declared:
            listed = ", ".join(declared)
            c.add(file, item, fld, f"'{value}' is not in the KB's declared vocabulary ({listed})")


def _check_duplicate_tests(c: _Checker) -> None:
    seen: dict[str, str] = {}
    for mechanism, rel in c.banks.layout.banks().items():
        for test in c.banks.tests(mechanism):
            also = seen.get(test.test_id)
            if also is not None:
                c.add(c.path(rel), test.test_id, "test_id", f"duplicate test id (also in {also})")
            seen.setdefault(test.test_id, rel)


def check_expectations(
    c: _Checker, file: str, item: str, exp: Expectations | SemanticTest, prefix: str = ""
) -> None:
    """`exp` is an Expectations, or a test read as its own (the fields are the same, and building
    an Expectations for each of thousands of tests would validate them all over again)."""
    roles = {role: list(getattr(exp, role)) for role in _ROLES}  # `relevant`: its keys
    for role, ids in roles.items():
        if ids:  # most tests leave most roles empty
            c.refs(file, item, f"{prefix}{role}", ids, SEMANTIC_MODES)
    ranked = [e for rc in exp.rank_check for e in (rc.higher, rc.lower)]
    if ranked:
        c.refs(file, item, f"{prefix}rank_check", ranked, SEMANTIC_MODES)
    if exp.not_expected:
        wanted = {*exp.expected_primary, *exp.expected_secondary}
        for eid in sorted(wanted.intersection(exp.not_expected)):
            c.add(file, item, f"{prefix}not_expected", f"'{eid}' is both expected and not expected")
    _check_one_role(c, file, item, prefix, roles)
    if not ranked:
        return
    fld = f"{prefix}rank_check"
    for rc in exp.rank_check:
        if rc.higher == rc.lower:
            c.add(file, item, fld, f"'{rc.higher}' is ranked against itself")
    for eid in sorted(set(ranked).intersection(exp.not_expected)):
        c.add(file, item, fld, f"'{eid}' is not expected, so it can never be ranked")
    cycle = _rank_cycle([(rc.higher, rc.lower) for rc in exp.rank_check if rc.higher != rc.lower])
    if cycle:
        c.add(file, item, fld, "circular: " + " > ".join(cycle))


def _check_one_role(c: _Checker, file: str, item: str, prefix: str, roles: dict[str, list[str]]) -> None:
    """An entity plays one role: a gain, an any-of member and a primary at once is ambiguous. Banks
    written before any-of and graded relevance stay valid as they were: among the older roles only
    "expected and not expected" is an error, reported on its own."""
    for eid in sorted({*roles["expected_any"], *roles["relevant"]}):
        where = [role for role, ids in roles.items() if eid in ids]
        if len(where) > 1:
            message = f"'{eid}' is in {' and '.join(where)}: an entity has one role"
            c.add(file, item, f"{prefix}{where[-1]}", message)


def _rank_cycle(edges: list[tuple[str, str]]) -> list[str]:
    """A cycle in "ranks above" (a > b > a), as the path around it from its first id, or []."""
    above: dict[str, set[str]] = {}  # each entity -> those ranked above it
    for higher, lower in edges:
        above.setdefault(lower, set()).add(higher)
    try:
        TopologicalSorter(above).prepare()
    except CycleError as exc:
        cycle = exc.args[1][:-1]  # each a predecessor (ranked above) of the next; first == last
        start = cycle.index(min(cycle))
        return [*cycle[start:], *cycle[:start], cycle[start]]
    return []


def _check_semantic(c: _Checker) -> None:
    if c.banks.semantic is None:
        return
    file = c.path(c.banks.layout.semantic)
    vocabulary = c.kb.vocabulary if c.kb else None
    for t in c.banks.semantic.tests:
        check_expectations(c, file, t.test_id, t)
        if vocabulary is not None:
            _check_vocabulary(c, file, t.test_id, "category", [t.category], vocabulary.categories)
            _check_vocabulary(c, file, t.test_id, "topics", t.topics, vocabulary.topics)
            user_types = [t.user_type] if t.user_type else []
            _check_vocabulary(c, file, t.test_id, "user_type", user_types, vocabulary.user_types)


def _check_state(c: _Checker) -> None:
    if c.banks.state is None:
        return
    file = c.path(c.banks.layout.state)
    for t in c.banks.state.tests:
        c.refs(file, t.test_id, "expected_handlers", t.expected_handlers, STATE_MODES)
        c.refs(file, t.test_id, "not_expected_handlers", t.not_expected_handlers, STATE_MODES)
        if not t.expected_handlers and not t.not_expected_handlers:
            c.add(file, t.test_id, "expected_handlers", "test checks nothing (both lists empty)")


def _check_pattern(c: _Checker) -> None:
    if c.banks.pattern is not None:
        file = c.path(c.banks.layout.pattern)
        for t in c.banks.pattern.tests:
            c.refs(file, t.test_id, "expected_matches", t.expected_matches, PATTERN_MODES)
            c.refs(file, t.test_id, "expected_secondary", t.expected_secondary, PATTERN_MODES)
            c.refs(file, t.test_id, "not_expected_matches", t.not_expected_matches, PATTERN_MODES)
            fld, needs = ("expected_matches", "expected matches")
            if t.pattern_type is PatternType.NEGATIVE:
                fld, needs = ("not_expected_matches", "entities it must not trigger")
            if not getattr(t, fld):
                c.add(file, t.test_id, fld, f"a {t.pattern_type.value} test needs {needs}")
    if c.banks.rules is None:
        return
    file = c.path(c.banks.layout.rules)
    for rule in c.banks.rules.crisis_patterns:
        item = crisis_pattern_name(rule.pattern)
        _check_regex(c, file, item, rule.pattern)
        c.refs(file, item, "entities", rule.entities, PATTERN_MODES)
    for i, boost in enumerate(c.banks.rules.keyword_boosts):
        c.refs(file, f"keyword_boosts[{i}]", "entity", [boost.entity], SEMANTIC_MODES)


def crisis_pattern_name(pattern: str) -> str:
    """A crisis pattern as problem lines name it: by its text, as a run's errors do (long ones
    shortened), since a rules file lists patterns, not ids."""
    shown = pattern if len(pattern) <= _SHOWN_PATTERN else pattern[: _SHOWN_PATTERN - 1] + "…"
    return f"crisis pattern /{shown}/"


def _check_regex(c: _Checker, file: str, item: str, pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        c.add(file, item, "pattern", f"regex does not compile: {exc}")
    risk = backtracking_risk(pattern)
    if risk:
        c.add(file, item, "pattern", risk)


def _check_always(c: _Checker) -> None:
    if c.banks.always is None:
        return
    file = c.path(c.banks.layout.always)
    declared = c.kb.vocabulary.user_types if c.kb else None
    served = {u for e in c.kb.entities for u in e.user_types} if c.kb else set()
    for t in c.banks.always.tests:
        c.refs(file, t.test_id, "expected_always", t.expected_always, ALWAYS_MODES)
        _check_vocabulary(c, file, t.test_id, "user_type", [t.user_type], declared)
        if declared is None and served and t.user_type not in served:
            known = ", ".join(sorted(served))
            message = f"no entity names user type '{t.user_type}' (known: {known})"
            c.warn(file, t.test_id, "user_type", f"{message}: only entities for everyone load")


def _check_history(c: _Checker) -> None:
    known = {t.test_id for t in c.banks.semantic.tests} if c.banks.semantic else set()
    for h in c.banks.history:
        file = str(h.path)
        if h.entry.version > c.now:
            when = h.entry.version.isoformat()
            c.warn(file, "-", "version", f"dated in the future ({when}): it applies from then")
        for change in h.entry.changes:
            if change.test_id not in known:
                c.add(file, change.test_id, "test_id", "history names a test the semantic bank lacks")
                continue
            if change.updated is not None:
                check_expectations(c, file, change.test_id, change.updated, "updated.")
            override = change.human_override
            if override is not None and not override.withdraw:
                check_expectations(c, file, change.test_id, override.expectations(), "human_override.")


def cross_check(
    kb: KnowledgeBase | None,
    kb_path: Path,
    banks: Banks,
    broken: frozenset[str] = frozenset(),
    now: datetime | None = None,
    warnings: list[Problem] | None = None,
    kb_checked: bool = False,
) -> list[Problem]:
    """Every cross-file problem; `kb_checked` skips the KB's own checks (a stored KB passed them
    with this code when it was stored). References to `broken` entities are not checked: one
    problem at the end counts them."""
    c = _Checker(kb, banks, broken, now or datetime.now(UTC))
    if not kb_checked:
        _check_kb(c, kb_path)
    _check_duplicate_tests(c)
    _check_semantic(c)
    _check_state(c)
    _check_pattern(c)
    _check_always(c)
    _check_history(c)
    if warnings is not None:
        warnings.extend(sorted(c.warnings))
    if c.unchecked:
        message = f"{c.unchecked} reference(s) to entities of the KB files above not checked: fix those first"
        c.add(str(banks.root), "-", "-", message)
    return c.problems


def load_validated(
    kb_path: Path, banks_dir: Path, warnings: list[Problem] | None = None, kb_cache: KbCache | None = None
) -> tuple[KnowledgeBase, Banks]:
    """Load and cross-check everything; raise InputError listing every problem found. Warnings
    (legal but probably unintended) are appended to `warnings` when given. With `kb_cache`, the
    KB comes from its stored copy while its files are unchanged, and is stored once everything
    has loaded without a problem."""
    problems: list[Problem] = []
    loaded = kb_cache.load(kb_path, problems) if kb_cache else Loaded(load_kb(kb_path, problems))
    kb = loaded.kb
    broken = unread_entities(kb_path, problems)
    banks = load_banks(banks_dir, problems)
    banks.history = load_history(banks_dir / banks.layout.history, problems)
    if warnings is not None:
        warnings.extend(entity_folder_warnings(kb_path))
    # A broken file's own problems print first; what it causes across files after them.
    later = cross_check(kb, kb_path, banks, broken, warnings=warnings, kb_checked=loaded.from_store)
    if problems or later or kb is None:
        empty = [Problem(str(kb_path), "-", "-", "knowledge base is empty")]
        raise InputError(problems or ([] if later else empty), later)
    if loaded.store is not None:
        loaded.store()
    return kb, banks
