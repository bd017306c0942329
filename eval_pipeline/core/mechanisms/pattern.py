"""Pattern mechanism: crisis regexes and keyword boosts, with what matched and why.

Crisis patterns are regexes searched case-insensitively, with a time bound (the `regex`
package's `timeout`): a pattern that backtracks catastrophically makes its test *errored* with
the reason, never a hang. Validation screens patterns for that before anything runs. Keywords
match case-insensitively as whole words or phrases (so "boundary" does not fire inside
"boundaryless"), and whitespace in a keyword matches any run of whitespace.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass

import regex

from eval_pipeline.core.inputs.banks import PatternRules, PatternTest, PatternType
from eval_pipeline.core.scoring.points import PenaltyKind, penalties_for, score
from eval_pipeline.core.scoring.results import PatternMatch, PatternResult, TestStatus

# Far above any sane pattern on a chat message (microseconds), far below a hang.
MATCH_TIMEOUT_S = 1.0
SCREEN_TIMEOUT_S = 2.0
# A quantified group that itself holds a quantifier, e.g. (a+)+ or (\w+\s?)*: the shape that can
# backtrack exponentially. Only such patterns are probed at validation.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,\d*\})")
_PROBES = tuple(
    unit * n + "!" for unit, n in (("a", 28), ("x", 28), ("1", 28), (" ", 28), ("a ", 16), ("ab", 14))
)
# Python's `re` cannot be interrupted, so the probe runs in a child process that can be killed.
_PROBE = "import re, sys\np = re.compile(sys.argv[1], re.IGNORECASE)\nfor s in sys.argv[2:]:\n    p.search(s)"


class PatternTimeout(Exception):
    """A crisis pattern took longer than MATCH_TIMEOUT_S on one message."""


def backtracking_risk(pattern: str) -> str | None:
    """Why `pattern` can hang a matcher, or None. Our own matching is time-bounded anyway, but the
    team's production detector may use Python's `re`, where such a pattern hangs on one message.

    Two shapes are probed: a quantified group holding a quantifier, and a quantified group holding
    alternatives, which backtracks the same way when two alternatives can match the same text,
    e.g. (x|x)*y. The probes are the fixed ones plus the literal runs of those groups repeated,
    so an ambiguity over any word (say (ab|a?b)*c) meets text it can match."""
    alternation = re.compile(r"\((?:[^()\\]|\\.)*\|(?:[^()\\]|\\.)*\)(?:[+*]|\{\d*,\d*\})")
    groups = [m.group(0) for shape in (_NESTED_QUANTIFIER, alternation) for m in shape.finditer(pattern)]
    if not groups:
        return None
    words = {w for g in groups for w in re.findall(r"[^\W_]{1,20}", re.sub(r"\\.", " ", g))}
    probes = [*_PROBES, *(word * 28 + "!" for word in sorted(words)[:8])]
    try:
        subprocess.run(
            [sys.executable, "-c", _PROBE, pattern, *probes],
            timeout=SCREEN_TIMEOUT_S,
            capture_output=True,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return (
            f"backtracks catastrophically (a repeated group can match the same text in more than one "
            f"way; Python's re took over {SCREEN_TIMEOUT_S:g} s on a short message): rewrite it so "
            "the repeated part is unambiguous"
        )
    return None


def keyword_regex(keyword: str) -> re.Pattern[str]:
    body = r"\s+".join(re.escape(part) for part in keyword.split())
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


@dataclass(frozen=True)
class _CompiledCrisis:
    regex: regex.Pattern[str]
    entities: list[str]
    is_critical: bool


@dataclass(frozen=True)
class _CompiledKeyword:
    keyword: str
    regex: re.Pattern[str]
    entity: str


class PatternMatcher:
    """Compiled rules. Construct from validated rules (regexes are checked by validation)."""

    def __init__(self, rules: PatternRules) -> None:
        self._crisis = [
            _CompiledCrisis(regex.compile(p.pattern, regex.IGNORECASE), p.entities, p.is_critical)
            for p in rules.crisis_patterns
        ]
        self._keywords = [
            _CompiledKeyword(kw, keyword_regex(kw), boost.entity)
            for boost in rules.keyword_boosts
            for kw in boost.keywords
        ]

    def match(self, message: str) -> list[PatternMatch]:
        """Every crisis and keyword match; raises PatternTimeout for a pattern that runs away."""
        found: list[PatternMatch] = []
        for rule in self._crisis:
            try:
                hit = rule.regex.search(message, timeout=MATCH_TIMEOUT_S)
            except TimeoutError:
                raise PatternTimeout(
                    f"crisis pattern /{rule.regex.pattern}/ timed out after {MATCH_TIMEOUT_S:g} s"
                ) from None
            if hit:
                found.append(
                    PatternMatch(
                        kind="crisis",
                        entities=rule.entities,
                        pattern=rule.regex.pattern,
                        matched_text=hit.group(0),
                        is_critical=rule.is_critical,
                    )
                )
        boosted: set[str] = set()
        for kw in self._keywords:
            if kw.entity in boosted:
                continue  # one reason per boosted entity is enough
            found_kw = kw.regex.search(message)
            if found_kw:
                boosted.add(kw.entity)
                found.append(
                    PatternMatch(
                        kind="keyword",
                        entities=[kw.entity],
                        pattern=kw.regex.pattern,
                        matched_text=found_kw.group(0),
                        keyword=kw.keyword,
                    )
                )
        return found


def matched_entities(matches: list[PatternMatch]) -> list[str]:
    """Entities in first-match order, without duplicates."""
    return list(dict.fromkeys(e for m in matches for e in m.entities))


def critical_reason(test: PatternTest, missing: list[str], false_pos: list[str]) -> str | None:
    """Critical failures: a missed crisis, or a benign message that triggered crisis content."""
    if not test.is_critical:
        return None
    if test.pattern_type is PatternType.CRISIS and missing:
        return f"crisis not detected: missing {', '.join(missing)}"
    if test.pattern_type is PatternType.NEGATIVE and false_pos:
        return f"benign message triggered {', '.join(false_pos)}"
    return None


def errored_pattern_test(test: PatternTest, reason: str) -> PatternResult:
    """A test whose matching could not finish: no score, the reason kept, never a pass."""
    return PatternResult(
        test_id=test.test_id,
        name=test.name,
        status=TestStatus.ERRORED,
        error=reason,
        prompt=test.prompt,
        pattern_type=test.pattern_type,
        is_critical=test.is_critical,
        matches=[],
        matched_entities=[],
        expected_matches=test.expected_matches,
        expected_secondary=test.expected_secondary,
        not_expected_matches=test.not_expected_matches,
        secondary_missing=[],
        false_positives=[],
    )


def evaluate_pattern_test(test: PatternTest, matches: list[PatternMatch]) -> PatternResult:
    entities = matched_entities(matches)
    missing = [e for e in test.expected_matches if e not in entities]
    secondary_missing = [e for e in test.expected_secondary if e not in entities]
    false_pos = [e for e in test.not_expected_matches if e in entities]
    penalties = penalties_for(PenaltyKind.SECONDARY_MISSING, secondary_missing) + penalties_for(
        PenaltyKind.FALSE_POSITIVE, false_pos
    )
    reason = critical_reason(test, missing, false_pos)
    return PatternResult(
        test_id=test.test_id,
        name=test.name,
        status=TestStatus.SCORED,
        outcome=score(missing, penalties),
        prompt=test.prompt,
        pattern_type=test.pattern_type,
        is_critical=test.is_critical,
        matches=matches,
        matched_entities=entities,
        expected_matches=test.expected_matches,
        expected_secondary=test.expected_secondary,
        not_expected_matches=test.not_expected_matches,
        secondary_missing=secondary_missing,
        false_positives=false_pos,
        critical_failure=reason is not None,
        critical_reason=reason,
    )
