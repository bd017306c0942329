"""`run` evaluates a date's models at once, bounded by the instance's provider pools.

The real CLI on the tenant domain, the real SDKs against the emulator, the project's own instance
settings (its SQLite storage, `concurrency: pools: default_limit: 1`). Overlap is proven, not
timed: the emulator holds each model's requests at a barrier until the other model's have
arrived, and refuses them (400) if they never do, as they would not in a sequential run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from eval_pipeline.cli import main
from eval_pipeline.cli.run import default_parallel
from eval_pipeline.core.scoring.run_document import RESULTS_FILE, read_document
from eval_pipeline.orchestration.execution import dagster_yaml, project_instance
from eval_pipeline.orchestration.standing import FINGERPRINT_TAG
from eval_pipeline.providers.models import load_models
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator

DATE = "2026-11-20"
HAIKU, SONNET, VOYAGE_RERANK = "claude-haiku-4-5", "claude-sonnet-4-5", "rerank-2.5"
RATE = 600  # a bucket of 10 reranks: a run of 8 tests x 3 trials paces for ~1.5 s
# A bucket larger than a run's 24 reranks: where no assertion is about pacing, a run never waits
# on it (an LLM reranker is always rate limited).
UNPACED = 60_000
MODELS: dict[str, dict[str, object]] = {
    "team-haiku": {"embedder": {"kind": "local"}, "reranker": {"kind": "claude", "model_id": HAIKU}},
    "team-voyage": {"embedder": {"kind": "local"}, "reranker": {"kind": "voyage", "model_id": VOYAGE_RERANK}},
    "team-sonnet": {"embedder": {"kind": "local"}, "reranker": {"kind": "claude", "model_id": SONNET}},
    "team-crash": {
        "embedder": {"kind": "local"},
        "reranker": {"kind": "cosine"},
        "system": {
            "kind": "python",
            "entrypoint": {"state": "tests.system_under_test:crash"},
            "mechanisms": ["state"],
        },
    },
}


@pytest.fixture
def workdir(tenant: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    models = {key: {**spec, "rate_limit_per_min": UNPACED, "trials": 3} for key, spec in MODELS.items()}
    (tmp_path / "models.yaml").write_text(yaml.safe_dump({"schema_version": 1, "models": models}))
    home = tmp_path / "dagster_home"
    home.mkdir()
    # The project's own settings: its SQLite storage (workers write to it from several processes
    # at once) and one run at a time per provider pool.
    (home / "dagster.yaml").write_text(dagster_yaml(home))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))  # the crash entry point
    return tmp_path


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorHandle]:
    with start_emulator() as handle:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
        monkeypatch.setenv("VOYAGE_API_KEY", "pa-test-not-a-real-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", handle.base_url)
        monkeypatch.setenv("VOYAGE_BASE_URL", handle.voyage_base_url)
        yield handle


def _run(*argv: str) -> int:
    return main(["run", "--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--date", DATE, *argv])


def _selections(results: Path, model: str) -> list[tuple[str, int, list[str], int | None]]:
    doc = read_document(results / model / DATE / RESULTS_FILE)
    assert doc.semantic and all(r.status != "errored" for r in doc.semantic), model
    return [(r.test_id, r.trial, [s.entity_id for s in r.selections], r.score) for r in doc.semantic]


@pytest.mark.parametrize("narrowed", [False, True], ids=["dagster-runs", "narrowed-adhoc"])
def test_models_on_different_providers_evaluate_at_once(
    workdir: Path, emulator: EmulatorHandle, narrowed: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    models = ["--model", "team-haiku", "--model", "team-voyage", "--cache", "off"]
    scope = ["--banks", "semantic"] if narrowed else []
    results = workdir / "results" / ("_scoped/banks-semantic" if narrowed else ".")
    emulator.reconfigure(barrier=(HAIKU, VOYAGE_RERANK))  # each waits for the other: in flight at once
    assert _run(*models, *scope) == 0, capsys.readouterr()
    at_once = {m: _selections(results, m) for m in ("team-haiku", "team-voyage")}
    out = capsys.readouterr().out
    assert out.index("running model team-voyage") < out.index("finished model team-haiku")
    if not narrowed:  # the workers' runs carry the invocation's fingerprint like the others
        with project_instance() as instance:
            tags = {r.tags.get(FINGERPRINT_TAG) for r in instance.get_runs()}
        assert len(tags) == 1 and None not in tags

    emulator.reconfigure(barrier=())
    assert _run(*models, *scope, "--parallel", "1") == 0
    assert {m: _selections(results, m) for m in at_once} == at_once
    out = capsys.readouterr().out
    assert out.index("finished model team-haiku") < out.index("running model team-voyage")


def test_models_sharing_a_pool_call_the_provider_one_after_the_other(
    workdir: Path, emulator: EmulatorHandle
) -> None:
    specs = yaml.safe_load((workdir / "models.yaml").read_text())
    for model in ("team-haiku", "team-sonnet"):
        specs["models"][model]["rate_limit_per_min"] = RATE
    (workdir / "models.yaml").write_text(yaml.safe_dump(specs))
    assert _run("--model", "team-haiku", "--model", "team-sonnet", "--cache", "off") == 0
    haiku, sonnet = emulator.counts.span(HAIKU), emulator.counts.span(SONNET)
    assert haiku[1] < sonnet[0] or sonnet[1] < haiku[0], (haiku, sonnet)
    assert emulator.stats["requests"]["POST /v1/messages"] == 2 * 8 * 3
    assert emulator.stats["statuses"].get("429", 0) == 0
    assert len(_selections(workdir / "results", "team-sonnet")) == 8 * 3


def test_a_worker_that_dies_fails_its_model_only(
    workdir: Path, emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    # One local model beside one API model runs one after the other by default: ask for workers.
    code = _run("--model", "team-crash", "--model", "team-haiku", "--cache", "off", "--parallel", "2")
    out, err = capsys.readouterr()
    assert code == 3
    assert "error: team-crash: worker process: ended (exit code -9) before its run reported" in err
    assert "team-crash @ 2026-11-20: no results were written" in err and "Traceback" not in out + err
    assert "failed model team-crash" in out and "finished model team-haiku" in out
    assert len(_selections(workdir / "results", "team-haiku")) == 8 * 3


@pytest.mark.parametrize(
    ("models", "expected"),
    [
        (["team-haiku", "team-voyage"], 2),  # both wait on APIs: at once
        (["team-haiku", "team-voyage", "team-sonnet"], 3),
        (["team-haiku", "team-crash"], 1),  # one waits on an API, one on the CPU
        (["team-crash", "team-local"], 1),  # two on the CPU only slow each other down
        (["team-http", "team-haiku"], 2),  # the team's HTTP service waits on the network too
    ],
)
def test_models_run_at_once_by_default_only_where_they_wait_on_remote_services(
    workdir: Path, models: list[str], expected: int
) -> None:
    specs = yaml.safe_load((workdir / "models.yaml").read_text())
    specs["models"]["team-local"] = {"embedder": {"kind": "local"}, "reranker": {"kind": "hybrid"}}
    specs["models"]["team-http"] = {"system": {"kind": "http", "url": "http://127.0.0.1:9/"}}
    (workdir / "models.yaml").write_text(yaml.safe_dump(specs))
    configs = load_models(workdir / "models.yaml")
    assert default_parallel({m: configs[m] for m in models}) == expected
