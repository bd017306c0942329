"""Pattern mechanism: crisis regexes and keyword boosts, with what matched and why.

Crisis patterns are regexes searched case-insensitively. Keywords match case-insensitively as
whole words or phrases (so "boundary" does not fire inside "boundaryless"), and whitespace in a
keyword matches any run of whitespace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eval_pipeline.core.banks import PatternRules, PatternTest, PatternType
from eval_pipeline.core.results import PatternMatch, PatternResult, TestStatus
from eval_pipeline.core.scoring import PenaltyKind, penalties_for, score


def keyword_regex(keyword: str) -> re.Pattern[str]:
    body = r"\s+".join(re.escape(part) for part in keyword.split())
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


@dataclass(frozen=True)
class _CompiledCrisis:
    regex: re.Pattern[str]
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
            _CompiledCrisis(re.compile(p.pattern, re.IGNORECASE), p.entities, p.is_critical)
            for p in rules.crisis_patterns
        ]
        self._keywords = [
            _CompiledKeyword(kw, keyword_regex(kw), boost.entity)
            for boost in rules.keyword_boosts
            for kw in boost.keywords
        ]

    def match(self, message: str) -> list[PatternMatch]:
        found: list[PatternMatch] = []
        for rule in self._crisis:
            hit = rule.regex.search(message)
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
            hit = kw.regex.search(message)
            if hit:
                boosted.add(kw.entity)
                found.append(
                    PatternMatch(
                        kind="keyword",
                        entities=[kw.entity],
                        pattern=kw.regex.pattern,
                        matched_text=hit.group(0),
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
