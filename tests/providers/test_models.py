"""models.yaml: the shipped defaults, error messages that point at the field, API keys."""

from __future__ import annotations

import textwrap
import typing
from pathlib import Path

import pytest
from anthropic.types.model import Model

from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.providers.models import (
    DEFAULT_RERANK_RATE_PER_MIN,
    ConfigError,
    ModelConfig,
    load_models,
    missing_keys,
    require_keys,
)
from eval_pipeline.providers.pricing import Price

MODELS_FILE = Path(__file__).resolve().parents[2] / "models.yaml"
KEY_VARS = ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def one_model(tmp_path: Path, body: str) -> Path:
    indented = textwrap.indent(textwrap.dedent(body).strip(), "    ")
    return write(tmp_path, f"schema_version: 1\nmodels:\n  m1:\n{indented}\n")


def test_default_file_loads() -> None:
    models = load_models(MODELS_FILE, price_overrides={})
    assert list(models) == [
        "local-minilm",
        "local-hybrid",
        "local-static",
        "voyage-haiku",
        "voyage-sonnet",
        "voyage-rerank",
    ]
    local = models["local-minilm"]
    assert local.enabled and not local.cost_incurring and local.rate_limit_per_min is None
    assert models["local-hybrid"].stages()[1].kind == "hybrid"
    static = models["local-static"]  # offered, not run by default: it retrieves worse
    assert not static.enabled and not static.cost_incurring
    assert static.stages()[0].model_id == "static-minilm-l6"
    for key in ("voyage-haiku", "voyage-sonnet", "voyage-rerank"):
        api = models[key]
        assert not api.enabled and api.cost_incurring
        assert api.rate_limit_per_min == DEFAULT_RERANK_RATE_PER_MIN
        assert api.price(api.stages()[0].model_id).input > 0


def test_default_claude_ids_are_known_to_the_pinned_sdk() -> None:
    known = set(typing.get_args(Model)[0].__args__)
    models = load_models(MODELS_FILE, price_overrides={})
    claude = [m.stages()[1].model_id for m in models.values() if m.stages()[1].kind == "claude"]
    assert claude and set(claude) <= known


def test_defaults_are_derived(tmp_path: Path) -> None:
    path = one_model(
        tmp_path,
        """
        embedder: {kind: local}
        reranker: {kind: claude, model_id: claude-haiku-4-5}
        """,
    )
    cfg = load_models(path, price_overrides={})["m1"]
    assert cfg.stages()[0].model_id == "local-minilm-l6-int8"
    assert cfg.cost_incurring and cfg.rate_limit_per_min == 48
    assert (cfg.concurrency, cfg.trials, cfg.stages()[1].prompt_version) == (4, 1, "rerank-v2")


_LOCAL = "embedder: {kind: local}\nreranker: {kind: cosine}"


def test_each_mechanism_names_its_implementation(tmp_path: Path) -> None:
    path = one_model(
        tmp_path,
        """
        embedder: {kind: local}
        reranker: {kind: cosine}
        system: {kind: python, entrypoint: "team.retrieval:System", mechanisms: [pattern, state]}
        """,
    )
    cfg = load_models(path, price_overrides={})["m1"]
    assert cfg.implementations == {
        Mechanism.SEMANTIC: "reference",
        Mechanism.STATE: "python",
        Mechanism.PATTERN: "python",
        Mechanism.ALWAYS: "reference",
    }
    assert cfg.system_mechanisms == [Mechanism.STATE, Mechanism.PATTERN]
    assert not cfg.cost_incurring


def test_the_earlier_http_form_is_the_system_running_semantic(tmp_path: Path) -> None:
    path = one_model(
        tmp_path,
        """
        embedder: {kind: http}
        reranker: {kind: http}
        http: {url: "http://127.0.0.1:9000/retrieve", timeout_s: 7}
        """,
    )
    cfg = load_models(path, price_overrides={})["m1"]
    assert cfg.system is not None and cfg.embedder is None and cfg.reranker is None
    system = (cfg.system.kind, cfg.system.url, cfg.system.timeout_s)
    assert system == ("http", "http://127.0.0.1:9000/retrieve", 7)
    assert cfg.system_mechanisms == [Mechanism.SEMANTIC]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("embedder: {kind: local}\nreranker: {kind: gpt}", "field 'reranker.kind'"),
        ("embedder: {kind: local}\nreranker: {kind: cosine}\nspeed: 3", "field 'speed'"),
        ("embedder: {kind: local}\nreranker: {kind: claude}", "reranker.model_id: required"),
        ("embedder: {kind: local}\nreranker: {kind: cosine}\nconcurrency: 0", "'concurrency'"),
        (
            "embedder: {kind: local}\nreranker: {kind: cosine, weights: {cosine: 1}}",
            "reranker.weights",
        ),
        (
            "embedder: {kind: voyage, model_id: voyage-3.5}\nreranker: {kind: cosine}\ncost_incurring: false",
            "cost_incurring",
        ),
        (
            "embedder: {kind: local}\nreranker: {kind: claude, model_id: claude-haiku-4-5}\n"
            "rate_limit_per_min: null",
            "rate_limit_per_min",
        ),
        ("embedder: {kind: http}\nreranker: {kind: cosine}", "'http' is a whole pipeline"),
        ("embedder: {kind: http}\nreranker: {kind: http}", "http: required"),
        (f"system: {{kind: http, mechanisms: [state]}}\n{_LOCAL}", "system.url"),
        (f"system: {{kind: python, mechanisms: [state]}}\n{_LOCAL}", "system.entrypoint"),
        ("system: {kind: python, entrypoint: 'no colon'}", "field 'system.entrypoint"),
        (
            f"system: {{kind: python, entrypoint: {{state: 'a:b'}}, mechanisms: [state, pattern]}}\n{_LOCAL}",
            "one entry point for each of system.mechanisms",
        ),
        (
            "system: {kind: python, entrypoint: 'a:b'}\nembedder: {kind: local}",
            "embedder: the team's system runs semantic",
        ),
        ("system: {kind: python, entrypoint: 'a:b', mechanisms: [state]}", "embedder: required unless"),
        (
            f"{_LOCAL}\ncandidate_depth: 0",
            "field 'candidate_depth': Input should be greater than or equal to 1",
        ),
        (
            f"{_LOCAL}\ncandidate_depth: 1001",
            "field 'candidate_depth': Input should be less than or equal to 1000",
        ),
        (f"{_LOCAL}\ncandidate_depth: 2.5", "field 'candidate_depth'"),
        (
            "embedder: {kind: local}\nreranker: {kind: claude, model_id: claude-new-1}",
            r"field 'prices': no price known for model 'claude-new-1'",
        ),
    ],
)
def test_bad_model_names_file_model_and_field(tmp_path: Path, body: str, expected: str) -> None:
    path = one_model(tmp_path, body)
    with pytest.raises(ConfigError, match=expected) as err:
        load_models(path, price_overrides={})
    message = str(err.value)
    assert message.startswith(f"{path}: model 'm1': ") and "\n" not in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("models: [1, 2]", "expected a mapping"),
        ("schema_version: 2\nmodels: {}", "schema_version 2"),
        ("models: {}\nextra: 1", "unknown top-level field"),
        ("models:\n  m1: [oops", r"models.yaml:3: invalid YAML"),
        ("models:\n  Bad Key!: {}", "field 'key'"),
    ],
)
def test_bad_file_is_one_clear_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as err:
        load_models(write(tmp_path, text), price_overrides={})
    assert str(tmp_path) in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_models(tmp_path / "absent.yaml")


def test_prices_in_file_and_overrides(tmp_path: Path) -> None:
    path = one_model(
        tmp_path,
        """
        embedder: {kind: local}
        reranker: {kind: claude, model_id: claude-new-1}
        prices: {claude-new-1: {input: 2, output: 8}}
        """,
    )
    assert load_models(path, price_overrides={})["m1"].price("claude-new-1").input == 2
    cheaper = {"claude-new-1": Price(input=1, output=4)}
    assert load_models(path, price_overrides=cheaper)["m1"].price("claude-new-1").input == 1


def api_model() -> ModelConfig:
    return ModelConfig.model_validate(
        {
            "key": "voyage-haiku",
            "embedder": {"kind": "voyage", "model_id": "voyage-3.5"},
            "reranker": {"kind": "claude", "model_id": "claude-haiku-4-5"},
        }
    )


def test_missing_keys_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    assert missing_keys(api_model()) == list(KEY_VARS)
    local = load_models(MODELS_FILE, price_overrides={})["local-minilm"]
    assert missing_keys(local) == []
    require_keys(local)


def test_missing_key_message_names_the_variable_not_a_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "sk-ant-test-should-never-appear"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(ConfigError) as err:
        require_keys(api_model())
    message = str(err.value)
    assert "VOYAGE_API_KEY" in message and "'voyage-haiku'" in message
    assert secret not in message and "ANTHROPIC_API_KEY" not in message and "\n" not in message
