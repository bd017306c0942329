"""Is a difference between two runs real or noise? A paired comparison of per-test scores (each
test is its own control).

- p-value: a sign-flip randomisation test of the mean difference, exact when few tests differ,
  else Monte Carlo with a fixed seed (the same inputs always give the same verdict).
- 95% confidence interval: a seeded percentile bootstrap. Effect size: Cohen's d_z.
- Clusters: tests that share a topic are not independent ("Adding error bars to evals", Miller
  2024): signs flip and the bootstrap resamples per cluster, and the standard error is clustered.
- Minimum detectable effect at 80% power: (z(1 − alpha/2) + z(0.8)) × standard error.
- Several comparisons at once (every pair of models): Holm's step-down correction; `p_adjusted`
  is what `significant` judges.
A difference is significant only when p < 0.05 *and* the interval excludes 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import Field

from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.sparse_json import SparseModel

ALPHA = 0.05
_Z_ALPHA = 1.959964  # two-sided 5%
_Z_POWER = 0.841621  # 80% power
RESAMPLES = 10_000
CHUNK_ELEMENTS = 1 << 20  # draws held at once by a resampling step (8 MiB of float64)
SEED = 20_261_101
EXACT_UP_TO = 12  # differing tests up to which all 2^n sign patterns are enumerated
_TOLERANCE = 1e-9  # float noise when comparing permuted statistics with the observed one


POINTS = "points"


class PairedComparison(SparseModel, FrozenModel):
    omitted_at_default = ("unit",)

    base_label: str
    head_label: str
    tests: int
    wins: int  # head scored higher
    ties: int
    losses: int
    mean_difference: float  # head − base, points per test
    ci_low: float
    ci_high: float
    p_value: float
    p_adjusted: float = Field(description="Holm-adjusted across the comparisons made together")
    clusters: int = Field(description="Independent units resampled (topics; = tests without clusters)")
    standard_error: float
    minimum_detectable_effect: float | None = Field(
        description="Smallest |mean difference| detectable with 80% power; None with under two units"
    )
    effect_size: float | None  # Cohen's d_z; None when every difference is the same non-zero value
    effect_label: str
    method: str
    significant: bool
    verdict: str
    unit: str = Field(default=POINTS, description="What a difference is counted in")


def topic_cluster(topics: Mapping[str, list[str]], test_id: str) -> str:
    """A test's cluster: its first topic, else the test alone."""
    return (topics.get(test_id) or [test_id])[0]


def _chunks(resamples: int, width: int) -> list[int]:
    """Row counts that cover `resamples` rows of `width` draws a block at a time: a whole
    10,000 x n matrix is gigabytes at 10,000 tests. The generator's stream does not depend on
    the block shape, so the result is the same as one draw of every row."""
    step = max(1, CHUNK_ELEMENTS // max(width, 1))
    return [min(step, resamples - start) for start in range(0, resamples, step)]


def sign_flip_p_value(diffs: np.ndarray, rng: np.random.Generator, resamples: int) -> tuple[float, str]:
    """Two-sided p-value of the mean difference, and how it was obtained."""
    nonzero = diffs[diffs != 0]  # a zero difference is the same under either sign
    n = len(nonzero)
    if n == 0:
        return 1.0, "no test differs"
    observed = abs(nonzero.sum())
    if n <= EXACT_UP_TO:
        patterns = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
        sums = np.abs((1 - 2 * patterns) @ nonzero)
        return float(np.mean(sums >= observed - _TOLERANCE)), f"exact sign-flip test over {2**n} patterns"
    extreme = 0
    for rows in _chunks(resamples, n):
        signs = rng.choice(np.array([-1.0, 1.0]), size=(rows, n))
        extreme += int(np.sum(np.abs(signs @ nonzero) >= observed - _TOLERANCE))
    # The observed assignment is one of the possible ones, so it is counted in (never p = 0).
    return (extreme + 1) / (resamples + 1), f"sign-flip randomisation, {resamples} resamples"


def bootstrap_ci(
    sums: np.ndarray, sizes: np.ndarray, rng: np.random.Generator, resamples: int
) -> tuple[float, float]:
    """Percentile CI of the mean per test, resampling units (clusters: their sums and sizes)."""
    if len(sums) == 0:
        return 0.0, 0.0
    parts = []
    for rows in _chunks(resamples, len(sums)):
        picks = rng.integers(0, len(sums), size=(rows, len(sums)))
        parts.append(sums[picks].sum(axis=1) / sizes[picks].sum(axis=1))
    means = np.concatenate(parts)
    low, high = np.percentile(means, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    return float(low), float(high)


def clustered_standard_error(diffs: np.ndarray, labels: np.ndarray) -> float:
    """Standard error of the mean with cluster-robust variance (plain SE when every test is alone)."""
    n = len(diffs)
    if n < 2:
        return 0.0
    residuals = diffs - diffs.mean()
    _, inverse = np.unique(labels, return_inverse=True)
    per_cluster = np.bincount(inverse, weights=residuals)
    clusters = len(per_cluster)
    if clusters < 2:
        return 0.0
    # Small-sample correction so that singleton clusters give the usual n/(n-1) variance.
    return float(np.sqrt(clusters / (clusters - 1) * np.sum(per_cluster**2)) / n)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def with_holm(comparisons: Sequence[PairedComparison]) -> list[PairedComparison]:
    """The comparisons with p-values adjusted together and their verdicts re-judged."""
    adjusted = holm([c.p_value for c in comparisons])
    out = []
    for c, p in zip(comparisons, adjusted, strict=True):
        judged = c.model_copy(
            update={"p_adjusted": round(p, 4), "significant": p < ALPHA and not c.ci_low <= 0 <= c.ci_high}
        )
        out.append(judged.model_copy(update={"verdict": _verdict(judged)}))
    return out


def cohens_dz(diffs: np.ndarray) -> float | None:
    if len(diffs) < 2:
        return None
    sd = float(np.std(diffs, ddof=1))
    # Equal differences can leave a float's hair of spread (nDCG × 100 is not a whole number):
    # that is no spread, not an effect of 10^13 standard deviations.
    if sd <= _TOLERANCE:
        return 0.0 if float(np.mean(diffs)) == 0 else None
    return float(np.mean(diffs)) / sd


def effect_label(d: float | None) -> str:
    if d is None:
        return "undefined"
    size = abs(d)
    for bound, label in ((0.2, "negligible"), (0.5, "small"), (0.8, "medium")):
        if size < bound:
            return label
    return "large"


def _verdict(c: PairedComparison) -> str:
    if c.tests == 0:
        return "no test was scored in both runs: not significant"
    d = "n/a" if c.effect_size is None else f"{c.effect_size:+.2f}"
    p = f"p = {c.p_value:.3g}" + (f", Holm {c.p_adjusted:.3g}" if c.p_adjusted != c.p_value else "")
    mde = "" if c.minimum_detectable_effect is None else f"; detectable ±{c.minimum_detectable_effect:.1f}"
    detail = (
        f"{c.mean_difference:+.1f} {c.unit} per test for {c.head_label} vs {c.base_label} "
        f"(95% CI {c.ci_low:+.1f} to {c.ci_high:+.1f}, {p}{mde}; "
        f"{c.wins} wins, {c.ties} ties, {c.losses} losses over {c.tests} tests; "
        f"effect {c.effect_label}, d = {d})"
    )
    if c.significant:
        better = c.head_label if c.mean_difference > 0 else c.base_label
        return f"{detail}: significant, {better} is better"
    return f"{detail}: not significant (within noise)"


def paired_comparison(
    base: Sequence[float],
    head: Sequence[float],
    base_label: str = "base",
    head_label: str = "head",
    seed: int = SEED,
    resamples: int = RESAMPLES,
    clusters: Sequence[str] | None = None,
    unit: str = POINTS,
) -> PairedComparison:
    """Compare per-test scores given in the same test order for both runs; `clusters` names
    each test's cluster (e.g. its topic) when tests are not independent."""
    if len(base) != len(head) or (clusters is not None and len(clusters) != len(base)):
        raise ValueError(f"paired scores must align: {len(base)} base vs {len(head)} head")
    diffs = np.asarray(head, dtype=float) - np.asarray(base, dtype=float)
    labels = np.asarray(clusters if clusters is not None else [str(i) for i in range(len(diffs))])
    _, inverse = np.unique(labels, return_inverse=True) if len(diffs) else (None, np.zeros(0, dtype=int))
    sums = np.bincount(inverse, weights=diffs) if len(diffs) else np.zeros(0)
    sizes = np.bincount(inverse).astype(float) if len(diffs) else np.zeros(0)
    rng = np.random.default_rng(seed)
    # Flipping a cluster's sum flips all its tests together: the randomisation respects clusters.
    p_value, method = sign_flip_p_value(sums, rng, resamples)
    low, high = bootstrap_ci(sums, sizes, rng, resamples)
    se = clustered_standard_error(diffs, labels)
    dz = cohens_dz(diffs)
    mean = float(diffs.mean()) if len(diffs) else 0.0
    comparison = PairedComparison(
        base_label=base_label,
        head_label=head_label,
        tests=len(diffs),
        wins=int(np.sum(diffs > 0)),
        ties=int(np.sum(diffs == 0)),
        losses=int(np.sum(diffs < 0)),
        mean_difference=round(mean, 2),
        ci_low=round(low, 2),
        ci_high=round(high, 2),
        p_value=round(p_value, 4),
        p_adjusted=round(p_value, 4),
        clusters=len(sums),
        standard_error=round(se, 3),
        minimum_detectable_effect=round((_Z_ALPHA + _Z_POWER) * se, 2) if len(sums) >= 2 else None,
        effect_size=None if dz is None else round(dz, 3),
        effect_label=effect_label(dz),
        method=f"{method}; bootstrap CI, {resamples} resamples; {len(sums)} clusters; seed {seed}",
        significant=p_value < ALPHA and not low <= 0 <= high,
        verdict="",
        unit=unit,
    )
    return comparison.model_copy(update={"verdict": _verdict(comparison)})
