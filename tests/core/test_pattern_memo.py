"""Crisis patterns that passed validation are not compiled and screened again (pattern_memo.py),
and a bad one is refused as ever."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.core.inputs import regex_safety, validation
from eval_pipeline.core.inputs.loading import InputError
from eval_pipeline.core.inputs.pattern_memo import PatternMemo
from eval_pipeline.core.inputs.validation import load_validated


def _load(tenant: Path, memo: PatternMemo | None) -> None:
    load_validated(tenant / "kb.yaml", tenant / "banks", patterns=memo)
    if memo is not None:
        memo.keep()


def _screens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The patterns the backtracking screen is asked about, from now on."""
    asked: list[str] = []
    real = regex_safety.backtracking_risk

    def screen(pattern: str) -> str | None:
        asked.append(pattern)
        return real(pattern)

    monkeypatch.setattr(validation, "backtracking_risk", screen)
    return asked


def _set_pattern(tenant: Path, pattern: str) -> None:
    rules = tenant / "banks" / "pattern" / "pattern_rules.json"
    data = json.loads(rules.read_text())
    data["crisis_patterns"][0]["pattern"] = pattern
    rules.write_text(json.dumps(data))


def test_a_set_that_passed_is_not_checked_again_until_it_changes(
    tenant: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = PatternMemo(tmp_path / "cache")
    asked = _screens(monkeypatch)
    load_validated(tenant / "kb.yaml", tenant / "banks", patterns=cache)
    assert not (tmp_path / "cache").exists()  # noted, not kept: the command may yet refuse its input
    cache.keep()
    count = len(asked)
    assert count > 0 and list((tmp_path / "cache" / "patterns").iterdir())
    _load(tenant, PatternMemo(tmp_path / "cache"))
    assert len(asked) == count  # remembered: neither compiled nor screened
    _load(tenant, PatternMemo(tmp_path / "cache", read=False))  # `--cache refresh` checks again
    _load(tenant, None)  # and so does a load without a cache
    assert len(asked) == 3 * count
    _set_pattern(tenant, r"\bno\s+way\s+out\b")
    _load(tenant, PatternMemo(tmp_path / "cache"))
    assert len(asked) == 4 * count  # another set: checked


@pytest.mark.parametrize(
    ("pattern", "message"),
    [("(unclosed", "regex does not compile"), ("(a+)+$", "backtracks catastrophically")],
)
def test_a_bad_pattern_is_refused_after_a_good_set_was_remembered(
    tenant: Path, tmp_path: Path, pattern: str, message: str
) -> None:
    _load(tenant, PatternMemo(tmp_path / "cache"))
    _set_pattern(tenant, pattern)
    with pytest.raises(InputError) as caught:
        _load(tenant, PatternMemo(tmp_path / "cache"))
    said = [p.message for p in caught.value.problems if p.item == f"crisis pattern /{pattern}/"]
    assert len(said) == 1 and said[0].startswith(message), said
    with pytest.raises(InputError):
        _load(tenant, PatternMemo(tmp_path / "cache"))  # never remembered
