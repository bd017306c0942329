"""What a diff adds for graded tests (a `relevant` gain above 0): nDCG@10 on each side, the
paired comparison of those nDCG@10 values, and the best relevant entity leaving the selection.

- nDCG@10 of a side: the mean over its scored trials of each final ranking's nDCG@10
  (`metrics.graded_ndcg`). Results 1.10+ store it (`evaluation.graded_ndcg`) and it is read as it
  is (measuring again costs tens of seconds on a large imported set); older rankings are measured.
- Only a test graded and scored on both sides gets one: graded on one side only, its expectations
  changed (the diff says so); an errored side has no ranking to measure.
- Best relevant dropped: some of the head's judged entities of the top gain were selected by the
  base (in any scored trial) and by no scored trial of the head; named in the collection's own
  ids. Not a kind of its own: the test keeps its kind, which the gate judges.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from eval_pipeline.core.diff.model import BestDropped, DroppedEntity, NdcgChange, PerTestDelta, RunRef
from eval_pipeline.core.diff.statistics import PairedComparison, paired_comparison, topic_cluster
from eval_pipeline.core.inputs.banks import Mechanism
from eval_pipeline.core.inputs.external_ids import OriginalIds
from eval_pipeline.core.mechanisms.retrieval import final_ranking
from eval_pipeline.core.scoring.metrics import graded_ndcg
from eval_pipeline.core.scoring.results import AnyResult, ResultStatus, SemanticResult

NDCG10_STORED_SINCE = (1, 10)
NDCG_POINTS = "nDCG@10 points"  # nDCG@10 × 100: the paired comparison's unit


def _scored(rows: Sequence[AnyResult]) -> list[SemanticResult]:
    """The scored trials of a semantic test graded in every one of them; none otherwise."""
    semantic = [r for r in rows if isinstance(r, SemanticResult)]
    if len(semantic) != len(rows) or not all(r.expectations.graded for r in semantic):
        return []
    return [r for r in semantic if r.status is ResultStatus.SCORED]


def _trial_ndcg(r: SemanticResult, stored: bool) -> float:
    if stored and r.evaluation is not None and r.evaluation.graded_ndcg is not None:
        return r.evaluation.graded_ndcg
    return graded_ndcg(final_ranking(r.selections, r.candidates), r.expectations)


def side_ndcg(rows: Sequence[SemanticResult], stored: bool) -> float:
    return statistics.fmean(_trial_ndcg(r, stored) for r in rows)


def stores_ndcg10(schema_version: str) -> bool:
    """Whether results of this schema store a graded test's nDCG@10 of its final ranking."""
    try:
        version = tuple(int(part) for part in schema_version.split(".")[:2])
    except ValueError:
        return False
    return version >= NDCG10_STORED_SINCE


def ndcg_change(
    base: Sequence[AnyResult], head: Sequence[AnyResult], stored: tuple[bool, bool] = (False, False)
) -> NdcgChange | None:
    """`stored`: whether each side's results store nDCG@10 (`stores_ndcg10`)."""
    b, h = _scored(base), _scored(head)
    if not b or not h:
        return None
    before, after = side_ndcg(b, stored[0]), side_ndcg(h, stored[1])
    return NdcgChange(before=before, after=after, delta=after - before)


def _selected(r: SemanticResult) -> list[str]:
    return [s.entity_id for s in sorted(r.selections, key=lambda s: s.rank)]


def best_dropped(
    base: Sequence[AnyResult], head: Sequence[AnyResult], ids: OriginalIds
) -> BestDropped | None:
    b, h = _scored(base), _scored(head)
    if not b or not h:
        return None
    gains = h[0].expectations.relevant
    top = max(gains.values())
    best = [e for e, g in gains.items() if g == top]
    if any(e in _selected(r) for r in h for e in best):
        return None
    places: dict[str, int] = {}
    for r in b:
        picked = _selected(r)
        places |= {e: picked.index(e) + 1 for e in best if e in picked and e not in places}
    if not places:
        return None
    entities = [
        DroppedEntity(entity_id=e, original_id=ids.document(e), gain=top, base_rank=places[e])
        for e in best
        if e in places
    ]
    return BestDropped(query_id=ids.query(h[0].test_id), entities=entities)


def graded_statistics(
    deltas: Sequence[PerTestDelta], topics: Mapping[str, list[str]], base: RunRef, head: RunRef
) -> PairedComparison | None:
    """The per-test nDCG@10 pairs (× 100), compared as the scores are: same tests' clusters
    (a test's first topic), same sign-flip test, bootstrap and seed. None without a pair."""
    paired = [
        (d.ndcg.before, d.ndcg.after, topic_cluster(topics, d.test_id))
        for d in deltas
        if d.mechanism == Mechanism.SEMANTIC.value and d.ndcg is not None
    ]
    if not paired:
        return None
    return paired_comparison(
        [100 * b for b, _, _ in paired],
        [100 * h for _, h, _ in paired],
        base_label=base.label,
        head_label=head.label,
        clusters=[c for _, _, c in paired],
        unit=NDCG_POINTS,
    )
