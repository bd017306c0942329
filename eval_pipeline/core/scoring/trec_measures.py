"""nDCG@k, recall@k and reciprocal rank of one ranking against one query's graded judgments, as
trec_eval computes them: the values pytrec_eval (and ir_measures over it) give, to the bit.

Our own few lines rather than the library: handing it every ranking as per-query dicts and
reading its answers back cost a run several times what the measures do (the libraries are test
references only; tests check every measure against both on random rankings).

trec_eval's conventions, with its float operations in its order (so results.json is unchanged):
- a ranking is the run as given, best first; an entity listed twice counts at its last place, as
  in the query -> entity -> score run this code once handed pytrec_eval;
- an unjudged entity has gain 0: judged not relevant and unjudged are alike;
- nDCG@k: the gains > 0 among the top k, each over log2(rank + 1), summed down the ranking; the
  ideal the same over the query's gains > 0 best first; 0 when no gain is above 0;
- recall@k: entities of gain >= `rel` among the top k over all of the query's; 0 when it has none;
- RR: 1 / rank of the first entity of gain >= `rel` (within the top k when cut off), else 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import log2


@dataclass(frozen=True, slots=True)
class Judged:
    """One query's judgments: entity -> gain, and its gains above 0 best first (the ideal ranking)."""

    gains: Mapping[str, int]
    ideal: tuple[int, ...]

    @classmethod
    def of(cls, gains: Mapping[str, int]) -> Judged:
        return cls(gains, tuple(sorted([g for g in gains.values() if g > 0], reverse=True)))

    def ranked(self, entity_ids: Sequence[str]) -> list[int]:
        """The gains of a ranking, in its order: what the measures below read."""
        if len(set(entity_ids)) != len(entity_ids):
            entity_ids = list(dict.fromkeys(reversed(entity_ids)))[::-1]
        get = self.gains.get
        return [get(e, 0) for e in entity_ids]


def _dcg(gains: Sequence[int]) -> float:
    total = 0.0
    for rank, g in enumerate(gains, start=1):
        if g > 0:
            total += g / log2(rank + 1)
    return total


def ndcg(ranked: Sequence[int], judged: Judged, k: int) -> float:
    best = _dcg(judged.ideal[:k])
    return _dcg(ranked[:k]) / best if best > 0.0 else 0.0


def recall(ranked: Sequence[int], judged: Judged, k: int, rel: int = 1) -> float:
    relevant = sum(g >= rel for g in judged.gains.values())
    return sum(g >= rel for g in ranked[:k]) / relevant if relevant else 0.0


def reciprocal_rank(ranked: Sequence[int], k: int | None = None, rel: int = 1) -> float:
    for rank, g in enumerate(ranked if k is None else ranked[:k], start=1):
        if g >= rel:
            return 1.0 / rank
    return 0.0
