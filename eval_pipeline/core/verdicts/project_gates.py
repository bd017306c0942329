"""The gates a project keeps: the `gates:` section of its models file, which `run`, `diff`, the
Dagster release gate and the CI recipes read and a command's flags override. Without a section
every gate is at its lenient default, as in a project made before gates were kept."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field

from eval_pipeline.core.verdicts.run_gate import DEFAULT_MAX_ERRORED


class ProjectGates(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, allow_inf_nan=False)

    fail_under: float | None = Field(
        default=None, ge=0, le=100, description="a combined score below this fails the release gate"
    )
    max_errored: int = Field(
        default=DEFAULT_MAX_ERRORED, ge=0, description="more errored tests than this fail the release gate"
    )
    fail_on_regression: bool = Field(
        default=False, description="a failed comparison with the previous evaluation fails `run`"
    )
    allow_removed: bool = Field(
        default=False, description="banks and tests the baseline ran and this one does not are accepted"
    )
    max_baseline_age_days: int | None = Field(
        default=None, ge=1, description="a baseline older than this many days fails the run (null: any age)"
    )

    def overridden(
        self,
        *,
        fail_under: float | None = None,
        max_errored: int | None = None,
        fail_on_regression: bool | None = None,
        allow_removed: bool | None = None,
        max_baseline_age_days: int | None = None,
    ) -> ProjectGates:
        """These gates with each flag that was given (not None) in place of the kept value."""
        given = {
            "fail_under": fail_under,
            "max_errored": max_errored,
            "fail_on_regression": fail_on_regression,
            "allow_removed": allow_removed,
            "max_baseline_age_days": max_baseline_age_days,
        }
        return self.model_copy(update={k: v for k, v in given.items() if v is not None})


# What `init` and `import-beir` write: POOR (a combined score under 70) fails the release gate.
NEW_PROJECT_GATES = ProjectGates(fail_under=70, fail_on_regression=True)


def gates_section(gates: ProjectGates) -> str:
    """`gates` as the models file's YAML section, each gate with what it does."""
    lines = ["# The gates this project keeps; a command's flags override them (docs: Verdicts).", "gates:"]
    for name, field in ProjectGates.model_fields.items():
        value = json.dumps(getattr(gates, name))  # YAML reads JSON scalars: null, true, 70.0
        lines.append(f"  {name}: {value}  # {field.description}")
    return "\n".join(lines) + "\n"
