"""Noise handled where it arises: a model whose answers vary between calls (an LLM reranker at
temperature > 0) has each semantic regression re-tried before it may fail a gate.

- Re-tried: the semantic tests that regressed against the base and still scored (an errored test
  is an outage for `--retry-errored`, not noise). Deterministic banks have no noise.
- A regression is *confirmed* when the re-trials' mean still fails the pass threshold (re-trials
  that all errored confirm it: an unknown outcome is no pass), and *dismissed* otherwise.
- Not reproducible: trials of one test that saw the same candidates but selected differently,
  within a run or across two runs of one model configuration.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from datetime import datetime

from eval_pipeline.core.diff.compare import diff_documents
from eval_pipeline.core.diff.model import DeltaKind, RunDiff
from eval_pipeline.core.expectations.resolution import ResolvedExpectation
from eval_pipeline.core.inputs.banks import Mechanism, SemanticTest
from eval_pipeline.core.mechanisms.retrieval import SemanticRetrieval
from eval_pipeline.core.scoring.evaluation import score_semantic
from eval_pipeline.core.scoring.reevaluate import record_of
from eval_pipeline.core.scoring.reevaluation import Confirmation, Decision, StoredReevaluation, Why
from eval_pipeline.core.scoring.results import SemanticResult
from eval_pipeline.core.scoring.run_document import RunDocument
from eval_pipeline.core.scoring.trials import Outcome, by_test

DEFAULT_RETRIALS = 3


def regressions_to_confirm(diff: RunDiff) -> list[str]:
    """Semantic tests that passed in the base and scored below the threshold in the head."""
    return [
        d.test_id
        for d in diff.of_kind(DeltaKind.REGRESSED)
        if d.mechanism == Mechanism.SEMANTIC.value and d.head is not None and d.head.score is not None
    ]


def next_trials(doc: RunDocument, count: int = DEFAULT_RETRIALS) -> list[int]:
    """Trial indices no trial of `doc` has used: a cached answer is keyed by its trial, so a
    re-trial under a used index would only read the same answer back."""
    start = max((r.trial for r in doc.semantic), default=-1) + 1
    return list(range(start, start + count))


def _scores(rows: Sequence[SemanticResult], threshold: int) -> dict[str, float | None]:
    return {t.test_id: t.score for t in by_test(rows, threshold)}


def confirmations(
    base: RunDocument, head: RunDocument, retrials: Sequence[SemanticResult]
) -> list[Confirmation]:
    """Each re-tried test's decision against `base` (see the module's rule)."""
    threshold = head.provenance.pass_threshold
    before, now = _scores(base.semantic, threshold), _scores(head.semantic, threshold)
    return [
        Confirmation(
            test_id=t.test_id,
            base_score=before.get(t.test_id) or 0.0,
            head_score=now.get(t.test_id) or 0.0,
            retrial_scores=t.scores,
            retrial_mean=statistics.fmean(t.scores) if t.scores else None,
            # Still not passing, as the diff judges a pass.
            decision=Decision.CONFIRMED if t.outcome is not Outcome.PASS else Decision.DISMISSED,
        )
        for t in by_test(retrials, threshold)
    ]


def confirm_regressions(
    base: RunDocument,
    head: RunDocument,
    tests: Sequence[SemanticTest],
    resolved: Mapping[str, ResolvedExpectation],
    retrievals: Sequence[SemanticRetrieval],
    at: datetime,
) -> StoredReevaluation:
    """The re-trials of `head`'s regressions against `base`, each test decided, ready to merge
    into `head` (`reevaluate`)."""
    retrials = score_semantic(tests, resolved, retrievals)
    label = f"{base.provenance.model}@{base.provenance.date}"  # the base's RunRef label
    record = record_of(Why.NOISE_CONFIRMATION, at, retrievals, base=label)
    decided = record.model_copy(update={"confirmations": confirmations(base, head, retrials)})
    return StoredReevaluation(record=decided, retrievals=list(retrievals))


def disagreeing_tests(docs: Sequence[RunDocument]) -> list[str]:
    """Tests whose trials saw the same candidates yet selected differently: the model is not
    reproducible. Only documents of one model configuration are compared with each other."""
    configs = {str(sorted(d.provenance.system_config.items())) for d in docs}
    rows = [r for d in docs for r in d.semantic] if len(configs) == 1 else [r for r in docs[0].semantic]
    seen: dict[tuple[str, tuple[str, ...]], set[tuple[str, ...]]] = {}
    for r in rows:
        if r.score is None:
            continue
        picks = tuple(s.entity_id for s in sorted(r.selections, key=lambda s: s.rank))
        seen.setdefault((r.test_id, tuple(c.entity_id for c in r.candidates)), set()).add(picks)
    return sorted({test_id for (test_id, _), picks in seen.items() if len(picks) > 1})


def regressed_against(base: RunDocument, head: RunDocument) -> list[str]:
    """The semantic regressions of `head` against `base` that re-trials should confirm."""
    return regressions_to_confirm(diff_documents(base, head, gate_only=True))
