"""The one base of every error the package raises on purpose, each kind carrying the exit code
the CLI reports it with (mapped in one place: cli/__init__.py). Exit codes are the command line's
contract: 0 gates met, 1 a gate failed, 2 bad input or configuration, 3 could not evaluate or an
internal error.
"""

from __future__ import annotations

from typing import ClassVar

EXIT_OK = 0
EXIT_GATE = 1
EXIT_INPUT = 2
EXIT_ERROR = 3


class EvalPipelineError(Exception):
    """An error eval_pipeline raises on purpose: its message is one line a user can act on."""

    exit_code: ClassVar[int] = EXIT_ERROR


class BadInput(EvalPipelineError):
    """The user's input or configuration is wrong (a file, an id, a field, a flag): nothing is
    evaluated or written."""

    exit_code = EXIT_INPUT


class CouldNotEvaluate(EvalPipelineError):
    """The input is fine but the evaluation could not be done (an API, a model file, a system
    under test that broke its contract)."""

    exit_code = EXIT_ERROR
