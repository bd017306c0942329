"""The pure parts of the benchmarks: the pace benchmark's floors and the one results table.
Nothing here is timed; `make bench` does the timing."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.__main__ import benchmarks
from benchmarks.api_pace import Tier, floor
from benchmarks.interleave import Timing, interleaved
from benchmarks.scale import (
    SIZES,
    _rounds,
    half_bank,
    half_vectors,
    marginal_row,
    marginal_s,
    numpy_floor,
    warm_row,
)
from benchmarks.startup import Pairs
from benchmarks.synthetic import write_corpus
from benchmarks.table import Row, render
from eval_pipeline.core.inputs.loading import Problem
from eval_pipeline.core.inputs.validation import load_validated


def test_rate_bound_floor_lets_the_first_call_through() -> None:
    fl = floor(Tier(48, 4), rate_calls=40, calls=80, latency_s=0.3)
    assert fl.bound == "rate"
    assert fl.seconds == pytest.approx(39 * 1.25)
    assert fl.formula == "(40 − 1) calls ÷ 48/min"


def test_latency_bound_floor_counts_every_call_over_the_calls_in_flight() -> None:
    fl = floor(Tier(1000, 4), rate_calls=40, calls=80, latency_s=0.3)
    assert fl.bound == "latency"
    assert fl.seconds == pytest.approx(80 * 0.3 / 4)


def test_rate_floor_subtracts_the_limiters_one_second_burst() -> None:
    # 1000/min: the bucket holds 1000/60 calls, so 100 calls need (100 - 16.7) / 16.7 s at least.
    fl = floor(Tier(1000, 64), rate_calls=100, calls=200, latency_s=0.3)
    assert fl.bound == "rate"
    assert fl.seconds == pytest.approx((100 - 1000 / 60) * 60 / 1000)


def test_retried_calls_raise_the_floor() -> None:
    clean = floor(Tier(48, 4, 0.2), rate_calls=40, calls=80, latency_s=0.3)
    retried = floor(Tier(48, 4, 0.2), rate_calls=50, calls=100, latency_s=0.3)
    assert retried.seconds - clean.seconds == pytest.approx(10 * 1.25)


def test_table_has_one_line_a_row_and_escapes_cells() -> None:
    rows = [
        Row("b", "a|b", "1.0×", "≤ 1.1×", True),
        Row("b", "c", "2.0×", "≤ 1.1×", False, "why"),
        Row("b", "d", "info"),
    ]
    lines = render(rows).splitlines()
    assert lines[0] == "| benchmark | case | measured | target | met | detail |"
    assert len(lines) == 2 + len(rows)
    assert lines[2] == "| b | a\\|b | 1.0× | ≤ 1.1× | yes |  |"
    assert lines[3].endswith("| **no** | why |")
    assert lines[4] == "| b | d | info |  |  |  |"


def test_the_runner_finds_the_pace_benchmark() -> None:
    assert "api_pace" in benchmarks()
    assert "table" not in benchmarks()


def test_the_runner_finds_every_benchmark() -> None:
    assert {
        "api_pace",
        "backfill_cost",
        "embedding",
        "scale",
        "run_paths",
        "startup",
        "instance_storage",
        "parallel_models",
    } <= set(benchmarks())
    assert "synthetic" not in benchmarks()
    # The quick pass leaves out the long ones (scale, the API pace at 48/min).
    quick = {name for name, b in benchmarks().items() if b.quick}
    assert quick and not quick & {"scale", "beir_scale", "api_pace", "instance_storage"}


def test_the_synthetic_corpus_is_valid_input_of_the_asked_size(tmp_path: Path) -> None:
    kb, banks = write_corpus(tmp_path, entities=20, tests=30)
    problems: list[Problem] = []
    loaded_kb, loaded_banks = load_validated(kb, banks, problems)
    assert problems == []
    assert len(loaded_kb.entities) == 20 and len(loaded_banks.semantic_tests) == 30
    # Test t asks about entity t mod 20, in words of that entity's own.
    first = loaded_banks.semantic_tests[21]
    assert first.expected_primary == ["item_00001"]
    again, _ = write_corpus(tmp_path / "again", 20, 30)
    same = (again / "entities/item_00001.yaml").read_text() == (kb / "entities/item_00001.yaml").read_text()
    assert same  # seeded: the same corpus every time


def test_a_batched_tier_waits_one_latency_a_round_of_embedding_calls_first() -> None:
    fl = floor(Tier(1000, 4, batched=True), rate_calls=40, calls=41, latency_s=0.3, upfront=1)
    assert fl.bound == "latency"
    assert fl.seconds == pytest.approx(0.3 + 40 * 0.3 / 4)
    five = floor(Tier(1000, 4, batched=True), rate_calls=40, calls=45, latency_s=0.3, upfront=5)
    assert five.seconds == pytest.approx(2 * 0.3 + 40 * 0.3 / 4)  # 5 calls, 4 at a time: 2 rounds


def test_interleaved_cases_take_turns_and_report_median_and_spread() -> None:
    order: list[str] = []
    timings = interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, rounds=3)
    assert order == ["a", "b", "b", "a", "a", "b"]  # turns, the order reversed every other round
    assert [len(t.seconds) for t in timings.values()] == [3, 3]
    t = Timing((1.0, 3.0, 2.0))
    assert (t.median, t.spread) == (2.0, 2.0)


def test_scale_rows_are_ratios_to_their_floor() -> None:
    ours, floor_ = Timing((3.0, 3.2, 2.9)), Timing((1.0, 1.1, 1.0))
    row = warm_row(1_000, 2_000, ours, floor_)
    assert row.measured.startswith("ours 3.00× the floor (1.50 vs 0.50 ms/test)") and row.met is False
    assert warm_row(1_000, 2_000, Timing((1.9,)), Timing((1.0,))).met is True
    assert marginal_row((1_000, 0.001, 0.001), (5_000, 0.00125, 0.002)).met is False  # 1.25×
    beside = marginal_row((1_000, 0.001, 0.001), (5_000, 0.0011, 0.002))
    assert beside.met is True and "the floor's own 2.00× (2.00 vs 1.00 ms/test)" in beside.detail


def test_the_numpy_floor_ranks_like_the_pipeline(tmp_path: Path) -> None:
    import json

    import numpy as np

    kb, banks = write_corpus(tmp_path, entities=20, tests=6)
    rng = np.random.default_rng(0)
    np.save(tmp_path / "entities.npy", rng.standard_normal((20, 8)).astype(np.float32))
    queries = rng.standard_normal((6, 8)).astype(np.float32)
    np.save(tmp_path / "queries.npy", queries)
    numpy_floor(kb, banks / "semantic" / "bank.json", tmp_path, tmp_path / "floor.json")
    rows = json.loads((tmp_path / "floor.json").read_text())["semantic"]
    matrix = np.load(tmp_path / "entities.npy")
    best = [f"item_{i:05d}" for i in np.argsort(-(matrix @ queries[2]))[:15]]
    assert [c["entity_id"] for c in rows[2]["candidates"]] == best
    half = half_bank(banks, tmp_path / "half")
    assert len(json.loads((half / "semantic" / "bank.json").read_text())["tests"]) == 3


def test_the_synthetic_beir_set_parses_to_the_texts_the_import_embeds(tmp_path: Path) -> None:
    import json

    import benchmarks.beir_scale as beir
    from eval_pipeline.core.inputs.beir_project import SUMMARY_CHARS, first_sentence

    src = beir.write_beir(tmp_path / "beir")
    ids, texts, queries = beir._parse(src)
    assert len(ids) == beir.PASSAGES and len(queries) == beir.QUERIES
    first = json.loads((src / "corpus.jsonl").read_text().splitlines()[0])
    summary = first_sentence(first["text"], SUMMARY_CHARS)
    assert ids[0] == "doc:0/p" and texts[0] == f"{first['title']}\n{summary}\n{first['text']}"


def test_whole_process_ratios_are_taken_round_by_round() -> None:
    # A slow round (a neighbour's burst) lands on both sides of it: the per-round ratios stay 2x.
    measured = Pairs(
        a_wall=(1.0, 4.0, 1.2), a_cpu=(0.4, 1.6, 0.5), b_wall=(0.5, 2.0, 0.6), b_cpu=(0.2, 0.8, 0.25)
    )
    assert measured.cpu_ratio == pytest.approx(2.0)
    assert measured.wall_ratio == pytest.approx(2.0)
    assert "per-round cpu ratio 2.0–2.0×" in measured.detail("A", "B")


def test_the_marginal_cost_pairs_each_rounds_two_runs() -> None:
    # The third round ran under load: both of its runs are slower, its difference is not. The
    # difference of the medians (20.0 - 19.5) would pair runs of different rounds.
    whole, half = Timing((10.0, 20.0, 31.0)), Timing((9.0, 19.5, 30.0))
    assert marginal_s(whole, half, added=4) == 1.0 / 4


def test_the_floors_half_reads_the_first_half_of_the_queries(tmp_path: Path) -> None:
    import numpy as np

    np.save(tmp_path / "entities.npy", np.ones((3, 2), dtype=np.float32))
    np.save(tmp_path / "queries.npy", np.arange(10, dtype=np.float32).reshape(5, 2))
    half = half_vectors(tmp_path, tests=5)
    assert np.load(half / "queries.npy").tolist() == [[0.0, 1.0], [2.0, 3.0]]
    assert np.load(half / "entities.npy").shape == (3, 2)


def test_shorter_runs_get_more_rounds() -> None:
    assert [_rounds(tests) for _, tests in SIZES] == [27, 18, 9]
