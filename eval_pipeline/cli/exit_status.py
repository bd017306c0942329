"""Exit codes and the user-mistake error shared by every `eval-pipeline` command."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

# The codes live with the error classes that carry them (core/errors.py).
from eval_pipeline.core.errors import EXIT_ERROR as EXIT_ERROR
from eval_pipeline.core.errors import EXIT_GATE, BadInput
from eval_pipeline.core.errors import EXIT_OK as EXIT_OK

if TYPE_CHECKING:  # the parser imports this module: no pydantic models at import time
    from eval_pipeline.core.inputs.loading import Problem
    from eval_pipeline.core.verdicts.run_gate import GateStatus


class UsageError(BadInput):
    """A user mistake in flags or configuration: one clear line, exit 2."""


def exit_for_gate(status: GateStatus) -> int:
    """A gate's status as the exit code that reports it (`run`'s release gate, `diff`'s diff gate)."""
    from eval_pipeline.core.verdicts.run_gate import GateStatus

    codes = {GateStatus.PASSED: EXIT_OK, GateStatus.FAILED: EXIT_GATE, GateStatus.UNEVALUABLE: EXIT_ERROR}
    return codes[status]


def print_warnings(warnings: Sequence[Problem]) -> None:
    """Legal but probably unintended input: shown on stderr, never a failure."""
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
