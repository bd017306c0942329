"""Content collapse: a primary still selected although its similarity to the query collapsed
(what `explain.collapse_alerts` sees), e.g. gutted content kept in by a keyword boost. A
regression of its own kind: the score hides it, so it fails the diff gate by default."""

from __future__ import annotations

from eval_pipeline.core.diff.explain import COLLAPSE_ALERT
from eval_pipeline.core.diff.model import DeltaKind, PerTestDelta, RunDiff


def collapsed(d: PerTestDelta) -> bool:
    return any(a.startswith(COLLAPSE_ALERT) for a in d.alerts)


def content_collapses(diff: RunDiff) -> list[PerTestDelta]:
    """Every test whose selected primary collapsed, critical tests first, then by id."""
    found = [d for d in diff.deltas if collapsed(d) and d.kind is not DeltaKind.REMOVED]
    return sorted(found, key=lambda d: (not d.critical, d.test_id))
