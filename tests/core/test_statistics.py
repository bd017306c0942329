from __future__ import annotations

import pytest

from eval_pipeline.core.diff.statistics import effect_label, paired_comparison

BASE = [float(60 + (i * 37) % 41) for i in range(40)]  # spread-out scores, fixed


def test_same_inputs_and_seed_give_the_same_result() -> None:
    head = [b + (5 if i % 3 else -4) for i, b in enumerate(BASE)]
    first, again = paired_comparison(BASE, head), paired_comparison(BASE, head)
    assert first == again
    assert "sign-flip randomisation, 10000 resamples" in first.method and "seed" in first.method


def test_a_clear_difference_is_significant() -> None:
    head = [b + 10 + (i % 5) for i, b in enumerate(BASE)]
    c = paired_comparison(BASE, head, base_label="minilm", head_label="hybrid")
    assert (c.wins, c.ties, c.losses) == (40, 0, 0)
    assert c.mean_difference == 12.0 and c.p_value == 0.0001  # (0 + 1) / (10000 + 1), rounded
    assert c.ci_low > 0 and c.significant and c.effect_label == "large"
    assert c.verdict.endswith(": significant, hybrid is better")


def test_identical_scores_are_not_significant() -> None:
    c = paired_comparison(BASE, BASE)
    assert (c.p_value, c.ci_low, c.ci_high, c.mean_difference, c.effect_size) == (1.0, 0.0, 0.0, 0.0, 0.0)
    assert (c.wins, c.ties, c.losses) == (0, 40, 0)
    assert not c.significant and c.verdict.endswith("not significant (within noise)")


def test_few_differences_use_the_exact_test() -> None:
    # Three tests, each +10: of the 2^3 sign patterns only all-plus and all-minus reach |30|.
    c = paired_comparison([50, 60, 70, 80], [60, 70, 80, 80])
    assert c.p_value == 0.25 and c.method.startswith("exact sign-flip test over 8 patterns")
    assert (c.wins, c.ties, c.losses) == (3, 1, 0) and not c.significant


def test_no_common_tests_and_misaligned_inputs() -> None:
    assert paired_comparison([], []).verdict == "no test was scored in both runs: not significant"
    with pytest.raises(ValueError, match="must align"):
        paired_comparison([1.0], [1.0, 2.0])


@pytest.mark.parametrize(
    ("d", "label"),
    [(0.1, "negligible"), (-0.3, "small"), (0.6, "medium"), (-1.2, "large"), (None, "undefined")],
)
def test_effect_labels(d: float | None, label: str) -> None:
    assert effect_label(d) == label


def test_resampling_in_blocks_gives_what_one_block_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    # Blocks bound the memory at 10,000 tests; they must not change a single number.
    from eval_pipeline.core.diff import statistics

    head = [b + (3 if i % 4 else -6) for i, b in enumerate(BASE)]
    monkeypatch.setattr(statistics, "CHUNK_ELEMENTS", 10**9)
    whole = paired_comparison(BASE, head, clusters=[str(i % 7) for i in range(40)])
    monkeypatch.setattr(statistics, "CHUNK_ELEMENTS", 64)  # 1-9 rows a block, a ragged last one
    assert paired_comparison(BASE, head, clusters=[str(i % 7) for i in range(40)]) == whole
    assert statistics._chunks(10, 3) == [10] and statistics._chunks(5, 100) == [1] * 5
