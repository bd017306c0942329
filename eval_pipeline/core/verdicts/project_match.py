"""Identity verdicts: a location (results folder, storage) belongs to one project, and a
comparison of two projects is incomparable, never a pass."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_pipeline.core.inputs.identity import ProjectIdentity

# Every run asks `location_conflict`; only a comparison has a RunDiff (and its statistics).
if TYPE_CHECKING:
    from eval_pipeline.core.diff.model import RunDiff


def location_conflict(held: ProjectIdentity, running: ProjectIdentity, where: str) -> str | None:
    """One line refusing to evaluate `running` into `where`, which holds `held`'s evaluations."""
    if held.same_project(running):
        return None
    return (
        f"{where} holds evaluations of project {held.label}, but --kb is project {running.label}; "
        "evaluate it into its own location (--results-dir DIR --storage-dir DIR) "
        "or scaffold a new project with `eval-pipeline init DIR`"
    )


def incomparable_reasons(diff: RunDiff) -> list[str]:
    return [f"incomparable: {diff.incomparable}"] if diff.incomparable else []
