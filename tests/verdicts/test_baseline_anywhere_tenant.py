"""The regression gate finds its baseline wherever results live and however long ago the last
evaluation was: the second-domain fixture (tests/verdicts/baseline_matrix.py says what is run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.core.dates import days_before, today_utc
from tests.deploy.conftest import s3, s3_endpoint
from tests.verdicts.baseline_matrix import evaluate_across_a_gap, make_cell

__all__ = ["s3", "s3_endpoint"]  # the module's local S3 server and bucket (fixtures)


@pytest.mark.parametrize(("location", "gap"), [("init", 1), ("flags", 12), ("env", 1), ("s3", 12)])
def test_the_gate_finds_its_baseline(
    location: str,
    gap: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    local_embeddings: Path,
    request: pytest.FixtureRequest,
) -> None:
    s3 = request.getfixturevalue("s3") if location == "s3" else None
    evaluate_across_a_gap(make_cell(location, "tenant", tmp_path, monkeypatch, local_embeddings, s3), gap)


def test_a_baseline_older_than_the_project_allows_fails_the_run_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_embeddings: Path
) -> None:
    cell = make_cell("init", "tenant", tmp_path, monkeypatch, local_embeddings, None)
    models = cell.project / "models.yaml"
    models.write_text(models.read_text().replace("max_baseline_age_days: null", "max_baseline_age_days: 7"))
    d0 = days_before(today_utc(), 12)
    assert cell.run("--date", d0)[0] == 0
    code, out = cell.run()
    assert code == 1, out
    assert (
        f"baseline gate failed: the baseline local-minilm @ {d0} is 12 days old, "
        "over the project's maximum baseline age of 7 days"
    ) in out
    assert f"since {d0}, 12 days earlier:" in out  # the comparison itself is still made and shown
    assert cell.run("--date", days_before(today_utc(), 5), "--force")[0] == 0  # 7 days back: young enough
