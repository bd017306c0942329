"""`run --junit`, `diff --junit` and the PR comment end to end on the tenant domain (local
model, real Dagster): the files validate against the Jenkins JUnit schema and name the failing
tests; a FILE that cannot be written is refused before anything is evaluated or read."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline.core.dates import today_utc
from tests.core.test_junit import cases, outcome, valid

DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--model", "local-minilm"]


def _one_line_refusal(capsys: pytest.CaptureFixture[str], named: Path, why: str) -> None:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and str(named) in err and why in err, err
    assert "Traceback" not in out + err


def test_run_and_diff_write_valid_junit_naming_the_regressions(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    yesterday = (date.fromisoformat(today_utc()) - timedelta(days=1)).isoformat()
    assert main(["run", *DATA, "--date", yesterday, "--junit", "base.xml"]) == 0
    base = cases(valid((workdir / "base.xml").read_text()))
    # The tests the file fails are the ones `run` lists as failing.
    printed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.startswith("    T-")]
    assert printed and [n.split("/")[1] for n, c in base.items() if outcome(c) != "passed"] == printed
    assert "gate/local-minilm" in base and any(name.startswith("semantic.") for name in base)

    kb = workdir / "tenant/kb.yaml"  # stop the first-conversation handler firing
    kb.write_text(
        kb.read_text().replace("is_first_conversation: {eq: true}", "is_first_conversation: {eq: never}")
    )
    assert main(["run", *DATA, "--junit", "head.xml"]) == 0  # a regression is no gate without the flag
    head = cases(valid((workdir / "head.xml").read_text()))
    failure = head["state/T-STATE-001"].find("failure")
    assert failure is not None
    assert failure.get("message", "").startswith("primary missing: missing handler_first_conversation")
    capsys.readouterr()

    refs = [f"local-minilm@{yesterday}", f"local-minilm@{today_utc()}"]
    assert main(["diff", *refs, "--junit", "diff.xml"]) == 1
    diff = cases(valid((workdir / "diff.xml").read_text()))
    regressed = diff["state/T-STATE-001"].find("failure")
    assert regressed is not None and regressed.get("message") == "deterministic regression: 100 → 0"
    assert outcome(diff["gate/diff gate"]) == "failure"
    capsys.readouterr()
    assert main(["diff", *refs, "--format", "markdown"]) == 1
    comment = capsys.readouterr().out.splitlines()
    assert comment[0].startswith("## ❌ Retrieval diff: FAILED") and len(comment) <= 60
    assert "- 1 deterministic regression(s): T-STATE-001" in comment[:6]
    assert [name for name, c in diff.items() if outcome(c) != "passed"] == [
        "state/T-STATE-001",
        "gate/diff gate",
    ]

    # A narrowed run writes its file too, with only the tests it ran.
    assert main(["run", *DATA, "--banks", "state", "--junit", "narrow.xml"]) == 0
    narrow = cases(valid((workdir / "narrow.xml").read_text()))
    assert {name.split("/")[0] for name in narrow} == {"state", "gate"}


@pytest.mark.parametrize("command", ["run", "diff"])
def test_a_junit_file_where_a_folder_stands_is_refused_first(
    workdir: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    args = [*DATA] if command == "run" else ["m@2026-11-19", "m@2026-11-20"]
    (workdir / "reports.xml").mkdir()
    assert main([command, *args, "--junit", "reports.xml"]) == 2
    _one_line_refusal(capsys, Path("reports.xml"), "a folder is in the way")
    assert not (workdir / "results").exists()


def test_a_junit_file_in_a_missing_folder_is_written_there_as_report_html_is(workdir: Path) -> None:
    assert main(["run", *DATA, "--banks", "state", "--junit", "nodir/deeper/x.xml"]) == 0
    assert cases(valid((workdir / "nodir/deeper/x.xml").read_text()))
