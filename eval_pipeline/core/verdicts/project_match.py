"""Identity verdict: a location (results folder, storage) belongs to one project (a comparison of
two projects is incomparable, never a pass: `regression_gate.incomparable_reasons`)."""

from __future__ import annotations

from eval_pipeline.core.inputs.identity import ProjectIdentity


def location_conflict(held: ProjectIdentity, running: ProjectIdentity, where: str) -> str | None:
    """One line refusing to evaluate `running` into `where`, which holds `held`'s evaluations."""
    if held.same_project(running):
        return None
    return (
        f"{where} holds evaluations of project {held.label}, but --kb is project {running.label}; "
        "evaluate it into its own location (--results-dir DIR --storage-dir DIR) "
        "or scaffold a new project with `eval-pipeline init DIR`"
    )
