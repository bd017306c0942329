"""The regression gate finds its baseline wherever results live and however long ago the last
evaluation was: the sample project (tests/verdicts/baseline_matrix.py says what is run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.conftest import s3, s3_endpoint
from tests.verdicts.baseline_matrix import evaluate_across_a_gap, make_cell

__all__ = ["s3", "s3_endpoint"]  # the module's local S3 server and bucket (fixtures)


@pytest.mark.parametrize(("location", "gap"), [("init", 12), ("flags", 1), ("env", 12), ("s3", 1)])
def test_the_gate_finds_its_baseline(
    location: str,
    gap: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    local_embeddings: Path,
    request: pytest.FixtureRequest,
) -> None:
    s3 = request.getfixturevalue("s3") if location == "s3" else None
    evaluate_across_a_gap(make_cell(location, "sample", tmp_path, monkeypatch, local_embeddings, s3), gap)
