from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from eval_pipeline import cli
from eval_pipeline.core.scoring.run_document import RunDocument
from tests.run_docs import doc, negative, sem

Main = Callable[..., int]


@pytest.fixture
def main() -> Main:
    return cli.main


def _save(results: Path, document: RunDocument) -> Path:
    path = results / document.provenance.model / document.provenance.date / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text(document.model_dump_json())
    return path


@pytest.fixture
def results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    _save(root, doc([sem("S-1", ["a", "b"]), sem("S-2", ["a"])], date="2026-11-19"))
    _save(root, doc([sem("S-1", ["a", "b"]), sem("S-2", ["a", "b"])], date="2026-11-20"))
    _save(root, doc([sem("S-1", ["b"]), sem("S-2", ["a"])], date="2026-11-21"))
    return root


def test_exit_0_without_regressions_and_unchanged_collapsed(
    main: Main, results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["diff", "m@2026-11-19", "m@2026-11-20", "--results-dir", str(results)])
    out = capsys.readouterr().out
    assert code == 0
    assert "== changed (1) ==\nS-2 [semantic] 90 → 100 (+10) · system changed" in out
    assert "unchanged: 1" in out and "S-1" not in out
    assert "statistics (semantic): +5.0 points per test" in out and "not significant" in out
    assert "health: EXCELLENT (unchanged)\ngate: PASSED" in out


def test_exit_1_when_a_test_regressed_with_paths_and_json(
    main: Main, results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, head = results / "m" / "2026-11-20" / "results.json", results / "m" / "2026-11-21"
    assert main(["diff", str(base), str(head)]) == 1
    assert "== regressed (1) ==\nS-1 [semantic] 100 → 0 (-100)" in capsys.readouterr().out
    assert main(["diff", str(base), str(head), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["diff"]["counts"]["regressed"] == 1 and data["diff"]["deltas"][0]["test_id"] == "S-1"
    assert data["gate"]["status"] == "failed"


@pytest.mark.parametrize(
    ("head", "message"),
    [
        ("m@2026-12-01", "m@2026-12-01: no results found (expected MODEL@DATE under"),
        ("other.json", "results schema 2.0, but this eval-pipeline reads 1.x"),
        ("broken.json", "broken.json: not a readable results document (JSONDecodeError)"),
    ],
)
def test_exit_2_with_one_line_for_unreadable_or_incompatible_input(
    main: Main, results: Path, capsys: pytest.CaptureFixture[str], head: str, message: str
) -> None:
    newer = json.loads(doc([sem("S-1", ["a"])]).model_dump_json())
    newer["provenance"]["schema_version"] = "2.0"
    (results / "other.json").write_text(json.dumps(newer))
    (results / "broken.json").write_text("{not json")
    ref = head if "@" in head else str(results / head)
    code = main(["diff", "m@2026-11-19", ref, "--results-dir", str(results)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_crisis_false_alarm_at_80_fails_the_diff_and_is_named_first(
    main: Main, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    semantic = [sem("S-1", ["a", "b"])]
    base = _save(tmp_path, doc(semantic, pattern_results=[negative("P-NEG", fires=False)]))
    head = _save(tmp_path, doc(semantic, pattern_results=[negative("P-NEG", fires=True)], date="2026-11-20"))
    assert main(["diff", str(base), str(head)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:5] == [
        "health: EXCELLENT → CRITICAL",
        "gate: FAILED",
        "  - 1 new critical failure(s): P-NEG",
        "== critical (1) ==",
    ]
    assert lines[5] == "P-NEG [pattern] 100 → 80 (-20) · system changed"
    assert main(["diff", str(base), str(head), "--strict"]) == 1
