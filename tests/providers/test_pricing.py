"""Cost of usage at each token kind's own rate; unknown prices are errors; override files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_pipeline.core.mechanisms.retrieval import Usage
from eval_pipeline.providers.pricing import (
    BUILTIN_PRICES,
    FREE,
    PRICES_ENV,
    Price,
    PricingError,
    cost_usd,
    load_price_overrides,
    lookup_price,
)

M = 1_000_000
HAIKU = BUILTIN_PRICES["claude-haiku-4-5"]


def test_each_token_kind_is_billed_at_its_own_rate() -> None:
    price = Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)
    usage = Usage(input_tokens=M, output_tokens=M, cache_creation_input_tokens=M, cache_read_input_tokens=M)
    assert cost_usd(usage, price) == pytest.approx(3.0 + 15.0 + 3.75 + 0.30)


def test_cache_reads_are_cheaper_than_input() -> None:
    fresh = cost_usd(Usage(input_tokens=10_000), HAIKU)
    cached = cost_usd(Usage(cache_read_input_tokens=10_000), HAIKU)
    written = cost_usd(Usage(cache_creation_input_tokens=10_000), HAIKU)
    assert cached == pytest.approx(fresh / 10) and written == pytest.approx(fresh * 1.25)


def test_one_hour_cache_writes_cost_twice_input_and_five_minute_writes_one_and_a_quarter() -> None:
    fresh = cost_usd(Usage(input_tokens=10_000), HAIKU)
    long_writes = Usage(cache_creation_input_tokens=10_000, cache_creation_1h_input_tokens=10_000)
    mixed = Usage(cache_creation_input_tokens=10_000, cache_creation_1h_input_tokens=4_000)
    assert cost_usd(long_writes, HAIKU) == pytest.approx(fresh * 2)
    assert cost_usd(mixed, HAIKU) == pytest.approx(fresh * (0.4 * 2 + 0.6 * 1.25))
    with pytest.raises(PricingError, match="cache_write_1h"):
        cost_usd(long_writes, Price(input=1.0, cache_write=1.25))


def test_usage_without_a_rate_is_an_error_not_free() -> None:
    embeddings = BUILTIN_PRICES["voyage-3.5"]
    assert cost_usd(Usage(input_tokens=2 * M), embeddings) == pytest.approx(0.12)
    with pytest.raises(PricingError, match="output"):
        cost_usd(Usage(output_tokens=1), embeddings)


def test_unknown_model_price_is_an_error() -> None:
    with pytest.raises(PricingError, match=r"claude-imaginary-9.*EVAL_PIPELINE_PRICES"):
        lookup_price("claude-imaginary-9")


def test_local_models_are_explicitly_free() -> None:
    for model_id in ("local-minilm-l6-int8", "cosine", "hybrid"):
        assert lookup_price(model_id) == FREE
    usage = Usage(input_tokens=5, output_tokens=5, cache_read_input_tokens=5)
    assert cost_usd(usage, FREE) == 0.0


def test_override_file_wins_over_builtin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"claude-haiku-4-5": {"input": 0.8, "output": 4.0}}))
    monkeypatch.setenv(PRICES_ENV, str(path))
    overrides = load_price_overrides()
    assert lookup_price("claude-haiku-4-5", overrides) == Price(input=0.8, output=4.0)
    assert lookup_price("voyage-3.5", overrides) == BUILTIN_PRICES["voyage-3.5"]


def test_no_override_file_means_no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PRICES_ENV, raising=False)
    assert load_price_overrides() == {}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "invalid JSON"),
        ('{"m1": {"input": NaN}}', "not a finite number"),
        ("[1, 2]", "expected an object"),
        ('{"m1": {"input": -1}}', r"model 'm1': input: .*greater than or equal"),
        ('{"m1": {"input": 1, "outptu": 2}}', r"model 'm1': outptu: "),
    ],
)
def test_bad_override_file_names_the_file(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content)
    with pytest.raises(PricingError, match=expected) as err:
        load_price_overrides({PRICES_ENV: str(path)})
    assert str(path) in str(err.value)


def test_missing_override_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.json"
    with pytest.raises(PricingError, match=r"nope\.json"):
        load_price_overrides({PRICES_ENV: str(path)})
