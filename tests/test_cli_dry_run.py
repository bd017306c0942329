"""`run --dry-run`: per model, the calls, tokens and USD a run would spend, with no call made and
nothing written; the real run then spends within 10% of the estimate, and what the cache holds
is free. Tenant domain, the real SDKs against the loopback emulator."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from eval_pipeline import cli
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.scoring.evaluation import Scope
from eval_pipeline.core.scoring.run_document import RESULTS_FILE, SCOPED_DIR, read_document
from eval_pipeline.providers.models import load_models
from eval_pipeline.providers.pricing import usd
from eval_pipeline.providers.spend_estimate import ModelSpend, StageSpend, estimate_spend
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from tests.conftest import REPO, TENANT
from tests.providers.conftest import FAKE_ANTHROPIC_KEY, VOYAGE_HAIKU, point_sdks_at

DATE = "2026-11-19"
DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks", "--date", DATE]
HAIKU, RERANK = "tenant-haiku", "tenant-rerank"
VOYAGE_RERANK = {
    "embedder": {"kind": "voyage", "model_id": "voyage-3.5"},
    "reranker": {"kind": "voyage", "model_id": "rerank-2.5"},
    "rate_limit_per_min": 6000,
}
SEMANTIC = Path("results") / SCOPED_DIR / "banks-semantic"
FULL = Scope(banks=frozenset(Mechanism), test_ids=frozenset(), topic=None)


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmulatorHandle]:
    shutil.copytree(TENANT, tmp_path / "tenant")
    models = yaml.safe_load((REPO / "models.yaml").read_text())
    models["models"][HAIKU] = VOYAGE_HAIKU
    models["models"][RERANK] = VOYAGE_RERANK
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(models))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    with start_emulator() as emu:
        point_sdks_at(emu, monkeypatch)
        yield emu


def _estimate(
    model: str, embedded: set[tuple[str, str, str]] | None = None, batch: bool = False
) -> ModelSpend:
    kb, banks = load_validated(Path("tenant/kb.yaml"), Path("tenant/banks"))
    cfg = load_models(Path("models.yaml"))[model]
    return estimate_spend(
        cfg, kb.entities, banks, FULL, Path(".cache"), "use", batch=batch, embedded=embedded
    )


def _stage(spend: ModelSpend, name: str) -> StageSpend:
    return next(s for s in spend.stages if s.stage == name)


def _near(actual: int, estimate: int) -> bool:
    return abs(actual - estimate) <= 0.10 * estimate


def test_dry_run_calls_nothing_writes_nothing_and_the_run_spends_what_it_said(
    work: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(p.name for p in Path().iterdir())
    argv = ["run", *DATA, "--model", HAIKU, "--model", RERANK, "--model", "local-minilm", "--dry-run"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert work.stats["total_requests"] == 0
    assert sorted(p.name for p in Path().iterdir()) == before  # no results, cache or instance
    assert "local-minilm: offline: 0 API calls, $0.00" in out
    assert f"{HAIKU}: " in out and f"{RERANK}: " in out and "0 answers cached" in out
    # The two models share an embedder: the second finds the first's vectors in the cache.
    embedded: set[tuple[str, str, str]] = set()
    haiku, rerank = _estimate(HAIKU, embedded), _estimate(RERANK, embedded)
    assert _stage(rerank, "embeddings").calls == 0 and _stage(rerank, "embeddings").cached > 0
    assert haiku.cost_usd > 0 and rerank.cost_usd > 0 and f"~{usd(haiku.cost_usd)}" in out
    batch = _stage(_estimate(HAIKU, batch=True), "rerank")  # prefix too short to cache: just half
    assert batch.calls == _stage(haiku, "rerank").calls
    online = _stage(haiku, "rerank").cost_usd
    assert online and batch.cost_usd == pytest.approx(online / 2)

    # The semantic bank alone: every call a run makes is semantic (no Dagster needed to show it).
    real = ["run", *DATA, "--model", HAIKU, "--model", RERANK, "--parallel", "1", "--banks", "semantic"]
    assert cli.main(real) == 0
    requests, batches = work.stats["requests"], work.stats["embed_batches"]
    embeds = [_stage(haiku, "embeddings"), _stage(rerank, "embeddings")]
    assert requests["POST /v1/embeddings"] == sum(s.calls for s in embeds)
    assert _near(sum(b["tokens"] for b in batches), sum(s.input_tokens for s in embeds))
    assert requests["POST /v1/messages"] == _stage(haiku, "rerank").calls
    assert requests["POST /v1/messages/count_tokens"] == _stage(haiku, "token counting").calls
    assert requests["POST /v1/rerank"] == _stage(rerank, "rerank").calls

    # A test's usage is its query's embedding and its rerank; the KB's embedding is a batch of
    # its own, made by the first model (the second finds it cached, as the estimate said).
    kb_batch = next(b for b in batches if b["texts"] > 1)["tokens"]
    for model, spend, kb_tokens in ((HAIKU, haiku, kb_batch), (RERANK, rerank, 0)):
        doc = read_document(SEMANTIC / model / DATE / RESULTS_FILE)
        used = [r.usage for r in doc.semantic]
        actual = kb_tokens + sum(
            u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens for u in used
        )
        assert _near(actual, spend.input_tokens), (model, actual, spend.input_tokens)
        # Output tokens are a planning figure (the emulator answers tersely); the bound holds.
        assert sum(u.output_tokens for u in used) <= spend.output_tokens
        # Results round costs to the millionth of a dollar.
        assert doc.aggregate.cost_usd <= round(spend.max_cost_usd, 6) + 1e-6
        if not spend.output_tokens:  # input tokens only: the cost is as near as they are
            assert abs(doc.aggregate.cost_usd - spend.cost_usd) <= 0.10 * spend.cost_usd

    # Everything is cached now: the estimate says so, and the next run makes only the free counts.
    again = _estimate(HAIKU)
    assert _stage(again, "rerank").calls == 0 and _stage(again, "embeddings").calls == 0
    assert _stage(again, "rerank").cached == len(
        read_document(SEMANTIC / HAIKU / DATE / RESULTS_FILE).semantic
    )
    assert again.cost_usd == 0 and again.calls == _stage(again, "token counting").calls == 2
    work.reset()
    assert cli.main(["run", *DATA, "--model", HAIKU, "--banks", "semantic"]) == 0
    assert work.stats["total_requests"] == again.calls


def test_the_team_system_is_counted_not_priced_and_never_called(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = yaml.safe_load(Path("models.yaml").read_text())
    # Nothing listens there: a dry run that called the system would error, not exit 0.
    models["models"]["team"] = {"system": {"kind": "http", "url": "http://127.0.0.1:9/answer"}}
    Path("models.yaml").write_text(yaml.safe_dump(models))
    assert cli.main(["run", *DATA, "--model", "team", "--model", "local-hybrid", "--dry-run"]) == 0
    out = capsys.readouterr().out
    _, banks = load_validated(Path("tenant/kb.yaml"), Path("tenant/banks"))
    tests = len(banks.test_ids())  # one call a test, every bank (trials: 1)
    assert f"team: {tests} calls, 0 input tokens, ~$0.00 + what the team's system costs" in out
    assert f"  team system http://127.0.0.1:9/answer: {tests} calls, 0 cached (not priced here)" in out
    assert "local-hybrid: offline: 0 API calls, $0.00" in out
    assert not Path("results").exists() and not Path(".cache").exists()


def test_on_a_kb_larger_than_the_candidate_list_the_estimate_holds_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The sample KB has more semantic entities than the 15 candidates: which ones a query gets is
    # unknown before its embedding, so the estimate sizes each request from typical entities.
    shutil.copytree(REPO / "kb", tmp_path / "kb")
    shutil.copytree(REPO / "test_banks", tmp_path / "test_banks")
    models = yaml.safe_load((REPO / "models.yaml").read_text())
    models["models"][HAIKU] = VOYAGE_HAIKU
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(models))
    monkeypatch.chdir(tmp_path)
    kb, banks = load_validated(Path("kb"), Path("test_banks"))
    ids = [t.test_id for t in banks.semantic_tests[:20]]
    scope = Scope(banks=frozenset({Mechanism.SEMANTIC}), test_ids=frozenset(ids), topic=None)
    with start_emulator() as emu:
        point_sdks_at(emu, monkeypatch)
        cfg = load_models(Path("models.yaml"))[HAIKU]
        spend = estimate_spend(cfg, kb.entities, banks, scope, Path(".cache"), "use")
        assert len(kb.entities) > 15 and emu.stats["total_requests"] == 0
        tests = [arg for i in ids for arg in ("--test", i)]
        assert cli.main(["run", "--model", HAIKU, "--banks", "semantic", "--date", DATE, *tests]) in (0, 1)
        assert emu.stats["total_requests"] == spend.calls
        batches = emu.stats["embed_batches"]
    (scoped,) = (Path("results") / SCOPED_DIR).iterdir()
    doc = read_document(scoped / HAIKU / DATE / RESULTS_FILE)
    used = [r.usage for r in doc.semantic]
    kb_batch = next(b for b in batches if b["texts"] > 1)["tokens"]
    actual = kb_batch + sum(
        u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens for u in used
    )
    assert _near(actual, spend.input_tokens), (actual, spend.input_tokens)


def test_a_local_embedder_with_an_api_reranker_counts_only_the_reranks(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens: no call may go
    models = yaml.safe_load(Path("models.yaml").read_text())
    models["models"]["local-claude"] = {**VOYAGE_HAIKU, "embedder": {"kind": "local"}}
    Path("models.yaml").write_text(yaml.safe_dump(models))
    spend = _estimate("local-claude")
    _, banks = load_validated(Path("tenant/kb.yaml"), Path("tenant/banks"))
    assert [s.stage for s in spend.stages] == ["rerank", "token counting"]
    assert _stage(spend, "rerank").calls == len(banks.semantic_tests) and spend.cost_usd > 0


def test_a_team_without_api_keys_yet_prices_an_api_model(
    work: EmulatorHandle, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("VOYAGE_API_KEY")
    assert cli.main(["run", *DATA, "--model", HAIKU, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert work.stats["total_requests"] == 0
    price = f"~{usd(_estimate(HAIKU).cost_usd)}"
    assert f"{HAIKU}: " in out and price in out and price != "~$0.00"
    # The run itself still needs the keys, and says which.
    assert cli.main(["run", *DATA, "--model", HAIKU]) == 2
    assert "needs the environment variable ANTHROPIC_API_KEY" in capsys.readouterr().err
