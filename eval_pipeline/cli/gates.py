"""The gate flags of `run` and `diff`, and the gates a command applies: the project's (its models
file's `gates:` section) with each flag that was given in their place."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the parser imports this module: the models load with the command
    from eval_pipeline.core.verdicts.project_gates import ProjectGates

GATES_NOTE = "default: the project's gates (models file, `gates:`)"


def allow_removed_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-removed",
        action=argparse.BooleanOptionalAction,
        help="accept banks and tests the earlier evaluation ran and this one does not (still "
        f"listed); {GATES_NOTE}, else no",
    )


def release_gate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-under", type=float, help=f"exit 1 when a combined score is below this; {GATES_NOTE}"
    )
    p.add_argument(
        "--fail-on-regression",
        action=argparse.BooleanOptionalAction,
        help="exit 1 when the comparison with the model's previous evaluation fails `diff`'s gate; "
        f"{GATES_NOTE}, else no",
    )
    p.add_argument(
        "--max-errored",
        type=int,
        help=f"exit 1 when more tests than this errored; {GATES_NOTE}, else 0: an unknown outcome is no pass",
    )


def project_gates(args: argparse.Namespace, kept: ProjectGates | None = None) -> ProjectGates:
    """The models file's gates (`kept`, when the command has read the file already) with the
    flags of `args` that were given in their place."""
    if kept is None:
        from eval_pipeline.providers.models import load_gates

        kept = load_gates(args.models_file)
    return kept.overridden(
        fail_under=getattr(args, "fail_under", None),
        max_errored=getattr(args, "max_errored", None),
        fail_on_regression=getattr(args, "fail_on_regression", None),
        allow_removed=args.allow_removed,
    )
