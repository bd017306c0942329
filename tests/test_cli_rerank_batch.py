"""`eval-pipeline run --batch`: a Claude reranker answers through one Message Batch, with the
online path's selections at half the rerank price, and the run says whether the reranker's KB
prefix could be cached. Tenant domain, the real SDKs against the emulator."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipeline import cli
from eval_pipeline.core.markdown_text import text
from eval_pipeline.core.scoring.run_document import REPORT_FILE, RESULTS_FILE, SCOPED_DIR, read_document
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from tests.conftest import REPO, TENANT
from tests.providers.conftest import VOYAGE_HAIKU, point_sdks_at

DATE = "2026-11-19"
DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--date", DATE]
MODEL = "tenant-haiku"
# The tenant KB's 8 rerankable entities: a prefix far below Haiku 4.5's minimum.
NOTE = "prompt cache not used: prefix 514 tokens < minimum 4096 for claude-haiku-4-5"


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorHandle]:
    shutil.copytree(TENANT, tmp_path / "tenant")
    models = yaml.safe_load((REPO / "models.yaml").read_text())
    models["models"][MODEL] = VOYAGE_HAIKU
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(models))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    (tmp_path / "dagster_home").mkdir()
    with start_emulator() as emu:
        point_sdks_at(emu, monkeypatch)
        yield emu


def test_batch_and_online_narrowed_runs_agree_and_say_the_prefix_is_too_short(
    work: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    scoped = Path("results") / SCOPED_DIR / "banks-semantic" / MODEL / DATE / RESULTS_FILE
    assert cli.main(["run", *DATA, "--model", MODEL, "--banks", "semantic", "--cache", "off"]) == 0
    online = read_document(scoped)
    out = capsys.readouterr().out
    assert "prompt cache not used: prefix " in out and "< minimum 4096 for claude-haiku-4-5" in out
    assert "POST /v1/messages/batches" not in work.stats["requests"]
    work.reset()

    argv = ["run", *DATA, "--model", MODEL, "--banks", "semantic", "--cache", "off", "--batch"]
    assert cli.main(argv) == 0
    batched = read_document(scoped)
    assert work.stats["requests"]["POST /v1/messages/batches"] == 1
    assert "POST /v1/messages" not in work.stats["requests"]
    assert [(r.test_id, r.selections) for r in batched.semantic] == [
        (r.test_id, r.selections) for r in online.semantic
    ]
    assert batched.semantic and all(r.status.value == "scored" for r in batched.semantic)
    assert batched.aggregate.cost_usd < online.aggregate.cost_usd
    assert (online.provenance.rerank_mode, batched.provenance.rerank_mode) == ("online", "batch")
    for doc in (online, batched):
        assert (
            doc.provenance.prompt_cache
            == "prompt cache not used: prefix 514 tokens < minimum 4096 for claude-haiku-4-5"
        )


def test_a_full_batch_run_records_the_mode_and_the_prompt_cache_on_the_asset(work: EmulatorHandle) -> None:
    assert cli.main(["run", *DATA, "--model", MODEL, "--batch"]) == 0
    assert work.stats["requests"]["POST /v1/messages/batches"] == 1
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("semantic_retrievals"))
    assert event is not None and event.asset_materialization is not None
    meta = event.asset_materialization.metadata
    assert meta["rerank_mode"].value == "batch"
    # Shown as text on a model x date asset (defs/metadata.py), not plotted.
    assert meta["prompt_cache_minimum_tokens"].value == "4096"
    note = NOTE
    assert meta["prompt_cache"].value == note and meta["prompt_cache_prefix_tokens"].value == "514"
    run_dir = Path("results") / MODEL / DATE
    provenance = read_document(run_dir / RESULTS_FILE).provenance
    assert (provenance.rerank_mode, provenance.prompt_cache) == ("batch", note)
    assert f"| Reranker prompt cache | {text(note)} |" in (run_dir / REPORT_FILE).read_text()
