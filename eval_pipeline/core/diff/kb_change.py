"""What a comparison spans: a KB change between its two sides (entities added, removed and
changed, by id), or two different projects, which no diff can compare."""

from __future__ import annotations

from eval_pipeline.core.inputs.frozen import FrozenModel
from eval_pipeline.core.inputs.identity import EvaluationIdentity


class KbChange(FrozenModel):
    added: list[str]
    removed: list[str]
    changed: list[str]

    @property
    def line(self) -> str:
        named = (("added", self.added), ("removed", self.removed), ("content changed", self.changed))
        parts = [f"{label} ({len(ids)}): {', '.join(ids)}" for label, ids in named if ids]
        return "KB change: entities " + "; ".join(parts)


def kb_change(base: EvaluationIdentity | None, head: EvaluationIdentity | None) -> KbChange | None:
    """The entities that differ, or None when the KBs are equal or a side predates identities."""
    if base is None or head is None or base.kb_hash == head.kb_hash:
        return None
    before, after = base.entities, head.entities
    return KbChange(
        added=sorted(after.keys() - before.keys()),
        removed=sorted(before.keys() - after.keys()),
        changed=sorted(e for e in before.keys() & after.keys() if before[e] != after[e]),
    )


def incomparable(base: EvaluationIdentity | None, head: EvaluationIdentity | None) -> str | None:
    """Why two evaluations belong to different projects, or None when they are one project."""
    if base is None or head is None or base.project.same_project(head.project):
        return None
    return (
        f"different projects: base is {base.project.label}, head is {head.project.label} "
        "(a diff compares evaluations of one project)"
    )
