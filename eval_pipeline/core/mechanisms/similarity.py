"""The numeric contract of semantic retrieval: how a cosine score is computed, rounded and ranked.

A float32 matrix product is not reproducible: BLAS kernels, thread counts and how many queries
share a product change its last bits (on some CPUs one-thread and two-thread products differ in a
sixth of the scores). So scores are computed here in float64 from the stored float32 vectors, whose
error is far below the rounding step, and rounded once to `SCORE_DECIMALS` places. Ranking,
selection, storage and comparison then only ever see the rounded value, and equal scores rank by
column, which is entity_id order (the index keeps its entities sorted by id). The same inputs
give the same scores, candidates and stored bytes whatever the machine or batch.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

SCORE_DECIMALS = 6

Scores = npt.NDArray[np.float64]


def cosine_scores(queries: npt.NDArray[np.floating], matrix: npt.NDArray[np.floating]) -> Scores:
    """Each query row against each entity row (unit vectors: the dot product is the cosine),
    computed in float64 and rounded to `SCORE_DECIMALS`."""
    product = np.asarray(queries, dtype=np.float64) @ np.asarray(matrix, dtype=np.float64).T
    return np.round(product, SCORE_DECIMALS)


def top_k(scores: Scores, k: int) -> npt.NDArray[np.intp]:
    """Per row, the column indices of its `k` best scores (all columns when fewer), best first;
    equal scores keep column order. A NaN score ranks last."""
    ranked = np.where(np.isnan(scores), -np.inf, scores)
    n = ranked.shape[1]
    if n > k:
        # Every column tied with the k-th best stays in, so the stable sort can break the tie by
        # column: a partition alone would pick among equals arbitrarily.
        kth = np.partition(ranked, n - k, axis=1)[:, n - k, np.newaxis]
        ranked = np.where(ranked >= kth, ranked, -np.inf)
    return np.argsort(-ranked, axis=1, kind="stable")[:, :k]
