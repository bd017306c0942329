"""Exit codes and the user-mistake error shared by every `eval-pipeline` command."""

import sys
from collections.abc import Sequence

# The codes live with the error classes that carry them (core/errors.py).
from eval_pipeline.core.errors import EXIT_ERROR as EXIT_ERROR
from eval_pipeline.core.errors import EXIT_GATE as EXIT_GATE
from eval_pipeline.core.errors import EXIT_INPUT as EXIT_INPUT
from eval_pipeline.core.errors import EXIT_OK as EXIT_OK
from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.inputs.loading import Problem
from eval_pipeline.core.verdicts.run_gate import GateStatus


class UsageError(BadInput):
    """A user mistake in flags or configuration: one clear line, exit 2."""


# A gate's status as the exit code that reports it (`run`'s release gate, `diff`'s diff gate).
EXIT_FOR_GATE = {GateStatus.PASSED: EXIT_OK, GateStatus.FAILED: EXIT_GATE, GateStatus.UNEVALUABLE: EXIT_ERROR}


def print_warnings(warnings: Sequence[Problem]) -> None:
    """Legal but probably unintended input: shown on stderr, never a failure."""
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
