"""`run` names every failing test and says what changed since the model's previous evaluation;
`--fail-on-regression` makes that comparison a gate. Tenant domain, local model, real Dagster."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline.core.dates import today_utc

DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--model", "local-minilm"]
# A KB edit that stops the first-conversation handler firing and the persona loading for tenants.
BREAK = (
    ("is_first_conversation: {eq: true}", "is_first_conversation: {eq: never}"),
    ("user_types: [TENANT]", "user_types: [CASEWORKER]"),
)


def _run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["run", *DATA, *extra])
    return code, capsys.readouterr().out


def test_a_planted_regression_is_named_and_gates_only_with_fail_on_regression(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    today = today_utc()
    yesterday = (date.fromisoformat(today) - timedelta(days=1)).isoformat()
    code, out = _run(capsys, "--date", yesterday)
    assert code == 0, out  # the baseline passes its gate
    assert "  since: no baseline: local-minilm has no evaluation dated before" in out
    kb = workdir / "tenant/kb.yaml"
    text = kb.read_text()
    for before, after in BREAK:
        assert before in text
        text = text.replace(before, after)
    kb.write_text(text)

    code, out = _run(capsys)
    assert code == 0, out  # the regression is reported, not a gate, without the flag
    since = out.split(f"  since {yesterday}, 1 day earlier:")[1].split("  failing tests")[0]
    assert "regressed: T-STATE-001 [state] 100 → 0" in since
    assert "regressed: T-ALWAYS-001 [always] 100 → 0" in since
    assert "regression gate: FAILED (reported only: --fail-on-regression gates on it)" in since
    failing = out.split("  failing tests (")[1].split("  report:")[0]
    assert "T-STATE-001 [state] 0.0 primary missing: missing handler_first_conversation" in failing
    assert "T-ALWAYS-001 [always] 0.0 primary missing: missing tenant_persona" in failing
    report = (workdir / f"results/local-minilm/{today}/report.md").read_text()
    assert f"## Since last run ({yesterday}, 1 day earlier)" in report
    assert "- regressed: T-STATE-001 [state]" in report and "- regressed: T-ALWAYS-001 [always]" in report
    for bank, test_id in (("state", "T-STATE-001"), ("always", "T-ALWAYS-001")):
        section = report.split(f"## Failing tests — {bank} (1)")[1].split("\n## ")[0]
        assert f"| {test_id} | 0.0 | primary missing |" in section

    # The same stored evaluation stands (nothing it rests on changed); the flag gates on it.
    code, out = _run(capsys, "--fail-on-regression")
    assert "up to date:" in out and code == 1, out
    assert "regression gate: FAILED (fails the run)" in out and "T-STATE-001" in out


def test_fail_on_regression_needs_a_full_run(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", *DATA, "--banks", "state", "--fail-on-regression"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith("error: --fail-on-regression: a narrowed run is never compared")
    assert not (workdir / "results").exists()
