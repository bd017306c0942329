"""Pattern mechanism: crisis regexes and keyword boosts, with what matched and why (how a
pattern test scores: scoring/registry.py).

Crisis patterns are regexes searched case-insensitively, with a time bound (the `regex`
package's `timeout`): a pattern that backtracks catastrophically makes its test *errored* with
the reason, never a hang. Validation screens patterns for that before anything runs
(inputs/regex_safety.py). Keywords match case-insensitively as whole words or phrases (so
"boundary" does not fire inside "boundaryless"), and whitespace in a keyword matches any run of
whitespace.
"""

from __future__ import annotations

import re
from typing import Literal

from eval_pipeline.core.errors import CouldNotEvaluate
from eval_pipeline.core.inputs.banks import PatternRules
from eval_pipeline.core.inputs.frozen import FrozenModel

# Far above any sane pattern on a chat message (microseconds), far below a hang.
MATCH_TIMEOUT_S = 1.0


class PatternMatch(FrozenModel):
    """Why an entity matched: the rule, the text it matched, and the keyword if a boost."""

    kind: Literal["crisis", "keyword"]
    entities: list[str]
    pattern: str
    matched_text: str
    keyword: str | None = None
    is_critical: bool = False


class PatternTimeout(CouldNotEvaluate):
    """A crisis pattern took longer than MATCH_TIMEOUT_S on one message."""


def keyword_regex(keyword: str) -> re.Pattern[str]:
    body = r"\s+".join(re.escape(part) for part in keyword.split())
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


class PatternMatcher:
    """Compiled rules. Construct from validated rules (regexes are checked by validation)."""

    def __init__(self, rules: PatternRules) -> None:
        import regex  # here: a run without pattern tests never compiles a crisis pattern

        self._crisis = [(regex.compile(p.pattern, regex.IGNORECASE), p) for p in rules.crisis_patterns]
        self._keywords = [
            (kw, keyword_regex(kw), boost.entity) for boost in rules.keyword_boosts for kw in boost.keywords
        ]

    def match(self, message: str) -> list[PatternMatch]:
        """Every crisis and keyword match; raises PatternTimeout for a pattern that runs away."""
        found: list[PatternMatch] = []
        for compiled, rule in self._crisis:
            try:
                hit = compiled.search(message, timeout=MATCH_TIMEOUT_S)
            except TimeoutError:
                raise PatternTimeout(
                    f"crisis pattern /{compiled.pattern}/ timed out after {MATCH_TIMEOUT_S:g} s"
                ) from None
            if hit:
                found.append(
                    PatternMatch(
                        kind="crisis",
                        entities=rule.entities,
                        pattern=compiled.pattern,
                        matched_text=hit.group(0),
                        is_critical=rule.is_critical,
                    )
                )
        boosted: set[str] = set()
        for keyword, compiled_kw, entity in self._keywords:
            # One reason per boosted entity is enough.
            if entity not in boosted and (found_kw := compiled_kw.search(message)):
                boosted.add(entity)
                found.append(
                    PatternMatch(
                        kind="keyword",
                        entities=[entity],
                        pattern=compiled_kw.pattern,
                        matched_text=found_kw.group(0),
                        keyword=keyword,
                    )
                )
        return found


def matched_entities(matches: list[PatternMatch]) -> list[str]:
    """Entities in first-match order, without duplicates."""
    return list(dict.fromkeys(e for m in matches for e in m.entities))
