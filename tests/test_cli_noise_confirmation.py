"""`run` confirms a non-reproducible model's semantic regressions before they can fail a gate.

End to end on the sample (94 semantic tests): a cosine reranker with seeded noise on its
similarities, declared `reproducible: false`, evaluated on two dates with different seeds (the
same model answering differently). `run` re-tries only the regressed semantic tests, records
each decision in the day's results, and `diff` (an offline comparison) reads the same decisions.
A model that is reproducible is never re-tried.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from eval_pipeline.cli import main
from eval_pipeline.core.diff.compare import diff_documents
from eval_pipeline.core.diff.model import DeltaKind
from eval_pipeline.core.scoring.reevaluation import Decision
from eval_pipeline.core.scoring.run_document import read_document
from eval_pipeline.core.verdicts.regression_gate import diff_gate
from tests.conftest import REPO
from tests.embedding_cache import warm

BASE, HEAD = "2026-11-20", "2026-11-21"


def _models(root: Path, seed: int, reproducible: bool) -> None:
    reranker = {"kind": "cosine", "jitter": 0.03, "seed": seed}
    entry = {"embedder": {"kind": "local"}, "reranker": reranker, "reproducible": reproducible}
    (root / "models.yaml").write_text(yaml.safe_dump({"schema_version": 1, "models": {"noisy": entry}}))


@pytest.fixture
def sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_embeddings: Path) -> Path:
    for name in ("kb", "test_banks"):
        shutil.copytree(REPO / name, tmp_path / name)
    warm(tmp_path / ".cache", local_embeddings)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    return tmp_path


@pytest.mark.parametrize("reproducible", [False, True])
def test_only_the_regressed_semantic_tests_are_retried_and_diff_reads_the_decisions(
    sample: Path, reproducible: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    _models(sample, seed=1, reproducible=reproducible)
    assert main(["run", "--model", "noisy", "--date", BASE]) == 1  # the sample's crisis misses
    _models(sample, seed=2, reproducible=reproducible)
    capsys.readouterr()
    assert main(["run", "--model", "noisy", "--date", HEAD]) == 1
    out = capsys.readouterr().out
    head = read_document(sample / "results" / "noisy" / HEAD / "results.json")
    if reproducible:
        assert head.provenance.reevaluations == [] and "re-tried" not in out
        return
    (record,) = head.provenance.reevaluations
    assert record.why == "noise-confirmation" and record.base == f"noisy@{BASE}"
    # What was re-tried is exactly the semantic regressions of the day's own answers (trial 0).
    base = read_document(sample / "results" / "noisy" / BASE / "results.json")
    first = head.model_copy(
        update={
            "semantic": [r for r in head.semantic if r.trial == 0],
            "provenance": head.provenance.model_copy(update={"reevaluations": []}),
        }
    )
    regressed = {
        d.test_id
        for d in diff_documents(base, first).of_kind(DeltaKind.REGRESSED)
        if d.mechanism == "semantic"
    }
    assert regressed and set(record.test_ids) == regressed
    confirmed, dismissed = record.decided(Decision.CONFIRMED), record.decided(Decision.DISMISSED)
    assert sorted(confirmed + dismissed) == sorted(regressed)
    assert f"{len(confirmed)} confirmed, {len(dismissed)} dismissed as noise" in out
    # Only the regressed tests were evaluated again, three more trials each.
    assert len(record.trials) == 3
    assert {r.test_id for r in head.semantic if r.trial > 0} == regressed
    # `diff`, offline, reads the stored decisions: dismissed regressions are excused, confirmed
    # ones fail; without them (the day's first answers) every regression would fail.
    gate = diff_gate(diff_documents(base, head))
    failing = " ".join(gate.reasons)
    assert not any(t in failing for t in dismissed) and all(t in failing for t in confirmed)
    assert all(t in " ".join(diff_gate(diff_documents(base, first)).reasons) for t in regressed)
    assert main(["diff", f"noisy@{BASE}", f"noisy@{HEAD}"]) == (1 if confirmed else 0)
