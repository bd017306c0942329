"""Coverage is part of the verdict: tests and banks an earlier evaluation ran and a later one did
not are a coverage regression, never a silent improvement. Any removal fails the gate unless
accepted (`--allow-removed`), and is then still named."""

from __future__ import annotations

from eval_pipeline.core.diff.model import DeltaKind, RunDiff

ALLOW_FLAG = "--allow-removed"


def coverage_lost(diff: RunDiff) -> list[str]:
    """One line per loss, most serious first: removed banks (with the critical tests each took
    with it), then removed critical tests, then ordinary ones, of the banks still run."""
    removed = diff.of_kind(DeltaKind.REMOVED)
    lines = []
    for bank in diff.removed_banks:
        ids = [d.test_id for d in removed if d.mechanism == bank and d.critical]
        lines.append(f"bank {bank} removed" + (f" with its critical tests {', '.join(ids)}" if ids else ""))
    kept = [d for d in removed if d.mechanism not in diff.removed_banks]
    if critical := [d.test_id for d in kept if d.critical]:
        lines.append(f"{len(critical)} critical test(s) removed: {', '.join(critical)}")
    if ordinary := [f"{d.test_id} ({d.mechanism})" for d in kept if not d.critical]:
        lines.append(f"{len(ordinary)} test(s) removed: {', '.join(ordinary)}")
    return lines


def coverage_verdict(diff: RunDiff, allow_removed: bool) -> tuple[list[str], list[str]]:
    """(reasons the gate fails, notes of what was accepted): each line names the removal."""
    lines = [f"coverage lost: {line}" for line in coverage_lost(diff)]
    if allow_removed:
        return [], [f"{line} (accepted by {ALLOW_FLAG})" for line in lines]
    return [f"{line} ({ALLOW_FLAG} accepts it)" for line in lines], []
