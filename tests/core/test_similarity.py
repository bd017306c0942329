"""The numeric contract of semantic scores: float64, rounded once, ties by entity order; the same
candidates and scores whatever the thread count, the batch around a query or the BLAS kernel."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from eval_pipeline.core.mechanisms.similarity import SCORE_DECIMALS, cosine_scores, top_k


def _unit(rows: int, dims: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, dims)).astype(np.float32)
    unit: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit


def test_scores_are_rounded_to_the_contract_s_step() -> None:
    scores = cosine_scores(_unit(7, 32, 1), _unit(50, 32, 2))
    assert scores.dtype == np.float64
    assert np.array_equal(scores, np.round(scores, SCORE_DECIMALS))
    assert all(len(repr(v).split(".")[-1]) <= SCORE_DECIMALS for v in scores.ravel().tolist())


@pytest.mark.parametrize(
    ("entities", "k"), [(3, 15), (15, 15), (16, 15), (400, 15), (2_003, 15), (2_003, 100)]
)
def test_top_k_is_a_full_stable_sort_s_first_k_ties_included(entities: int, k: int) -> None:
    # Integer vectors make many equal scores: ties must rank by column (entity_id), as a full
    # stable sort would.
    rng = np.random.default_rng(entities)
    matrix = rng.integers(0, 4, size=(entities, 8)).astype(np.float32)
    queries = rng.integers(0, 3, size=(40, 8)).astype(np.float32)
    scores = cosine_scores(queries, matrix)
    expected = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    assert top_k(scores, k).tolist() == expected.tolist()


def test_nan_scores_rank_last_and_never_drop_a_candidate() -> None:
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((500, 8)).astype(np.float32)
    matrix[[3, 250]] = np.nan
    queries = rng.standard_normal((6, 8)).astype(np.float32)
    queries[2, 0] = np.nan
    scores = cosine_scores(queries, matrix)
    top = top_k(scores, 15)
    assert top.shape == (6, 15)
    for row, picked in zip(scores, top, strict=True):
        finite = np.flatnonzero(~np.isnan(row))
        expected = finite[np.argsort(-row[finite], kind="stable")][:15].tolist()
        expected += np.flatnonzero(np.isnan(row)).tolist()[: 15 - len(expected)]
        assert picked.tolist() == expected


def test_a_query_scores_the_same_alone_as_in_any_block() -> None:
    matrix, queries = _unit(5_000, 384, 3), _unit(50, 384, 4)
    together = cosine_scores(queries, matrix)
    for i in (0, 17, 49):
        assert cosine_scores(queries[i : i + 1], matrix).tolist() == together[i : i + 1].tolist()
    assert cosine_scores(queries[10:13], matrix).tolist() == together[10:13].tolist()


# Scores and top 15 of a 50 x 5,000 x 384 product (large enough for BLAS to thread it) as JSON.
_PROBE = """
import json, sys
import numpy as np
from eval_pipeline.core.mechanisms.similarity import cosine_scores, top_k
def unit(rows, seed):
    v = np.random.default_rng(seed).standard_normal((rows, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)
matrix, queries = unit(5000, 3), unit(50, 4)
rows = [cosine_scores(queries, matrix)] + [cosine_scores(queries[i : i + 1], matrix) for i in (0, 31)]
print(json.dumps([[r.tolist(), top_k(r, 15).tolist()] for r in rows]))
"""


def test_scores_and_candidates_are_the_same_on_one_or_two_blas_threads() -> None:
    # Whatever BLAS kernel the machine picks (OPENBLAS_CORETYPE, if set, is inherited as it is).
    def probe(threads: str) -> list[list[list[float]]]:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}
        out = subprocess.run(
            [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout)  # type: ignore[no-any-return]

    one, two = probe("1"), probe("2")
    assert one == two
    full, *alone = one
    assert alone[0][0][0] == full[0][0] and alone[1][0][0] == full[0][31]
