"""Exit codes and the user-mistake error shared by every `eval-pipeline` command."""

import sys
from collections.abc import Sequence

from eval_pipeline.core.inputs.loading import Problem
from eval_pipeline.core.verdicts.run_gate import GateStatus

EXIT_OK = 0  # done, gates met
EXIT_GATE = 1  # a gate failed (CRITICAL, --fail-under, a regression in `diff`)
EXIT_INPUT = 2  # bad input or configuration: one clear line, no traceback
EXIT_ERROR = 3  # an internal or API error after retries


class UsageError(Exception):
    """A user mistake in flags or configuration: one clear line, exit 2."""


# A gate's status as the exit code that reports it (`run`'s release gate, `diff`'s diff gate).
EXIT_FOR_GATE = {GateStatus.PASSED: EXIT_OK, GateStatus.FAILED: EXIT_GATE, GateStatus.UNEVALUABLE: EXIT_ERROR}


def print_warnings(warnings: Sequence[Problem]) -> None:
    """Legal but probably unintended input: shown on stderr, never a failure."""
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
