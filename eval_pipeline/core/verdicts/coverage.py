"""Coverage is part of the verdict: tests and banks that an earlier evaluation ran and a later
one did not are a coverage regression, never a silent improvement. Removed banks and removed
critical tests are listed first, with the critical tests each bank took with it; any removal
fails the gate unless the caller accepts it (`--allow-removed`), and is then still named."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from eval_pipeline.core.diff.model import DeltaKind, PerTestDelta, RunDiff

ALLOW_FLAG = "--allow-removed"


class CoverageLoss(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    banks: dict[str, list[str]]  # removed bank -> its critical tests
    critical: list[str]  # removed critical tests of banks that are still run
    ordinary: list[str]  # "id (bank)" of removed ordinary tests of banks still run

    @property
    def lost(self) -> bool:
        return bool(self.banks or self.critical or self.ordinary)

    def lines(self) -> list[str]:
        """Most serious first: banks, critical tests, then ordinary tests."""
        out = [
            f"bank {bank} removed" + (f" with its critical tests {', '.join(ids)}" if ids else "")
            for bank, ids in self.banks.items()
        ]
        if self.critical:
            out.append(f"{len(self.critical)} critical test(s) removed: {', '.join(self.critical)}")
        if self.ordinary:
            out.append(f"{len(self.ordinary)} test(s) removed: {', '.join(self.ordinary)}")
        return out


def coverage_loss(diff: RunDiff) -> CoverageLoss:
    removed: list[PerTestDelta] = diff.of_kind(DeltaKind.REMOVED)
    gone = set(diff.removed_banks)
    return CoverageLoss(
        banks={
            b: [d.test_id for d in removed if d.mechanism == b and d.critical] for b in diff.removed_banks
        },
        critical=[d.test_id for d in removed if d.critical and d.mechanism not in gone],
        ordinary=[
            f"{d.test_id} ({d.mechanism})" for d in removed if not d.critical and d.mechanism not in gone
        ],
    )


def coverage_verdict(diff: RunDiff, allow_removed: bool) -> tuple[list[str], list[str]]:
    """(reasons the gate fails, notes of what was accepted): each line names the removal."""
    lines = [f"coverage lost: {line}" for line in coverage_loss(diff).lines()]
    if allow_removed:
        return [], [f"{line} (accepted by {ALLOW_FLAG})" for line in lines]
    return [f"{line} ({ALLOW_FLAG} accepts it)" for line in lines], []
