"""The `eval-pipeline` command.

Exit codes are a contract: 0 ran and gates met, 1 a gate failed, 2 bad input or configuration,
3 could not evaluate or an internal error (one line; `--debug` shows the traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TextIO

from eval_pipeline.cli.gc_pause import cyclic_gc_paused
from eval_pipeline.core.errors import EXIT_ERROR, EvalPipelineError


def build_parser() -> argparse.ArgumentParser:
    # Heavy imports (dagster, onnxruntime) stay inside the commands that need them.
    from eval_pipeline.cli.agreement import add_agreement_commands
    from eval_pipeline.cli.backfill import add_backfill_command
    from eval_pipeline.cli.calibrate import add_calibrate_commands
    from eval_pipeline.cli.diff import add_diff_commands
    from eval_pipeline.cli.export_trec import add_export_trec_command
    from eval_pipeline.cli.import_beir import add_import_beir_command
    from eval_pipeline.cli.init import add_init_command
    from eval_pipeline.cli.models import add_models_command
    from eval_pipeline.cli.override import add_override_command
    from eval_pipeline.cli.report import add_report_command
    from eval_pipeline.cli.run import add_run_commands
    from eval_pipeline.cli.show import add_show_command
    from eval_pipeline.cli.validate import add_validate_commands

    parser = argparse.ArgumentParser(
        prog="eval-pipeline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_commands(sub)
    add_backfill_command(sub)
    add_show_command(sub)
    add_models_command(sub)
    add_diff_commands(sub)
    add_calibrate_commands(sub)
    add_override_command(sub)
    add_agreement_commands(sub)
    add_validate_commands(sub)
    add_init_command(sub)
    add_report_command(sub)
    add_import_beir_command(sub)
    add_export_trec_command(sub)
    return parser


class _PipeSafeStdout(io.TextIOBase):
    """stdout that goes quiet once its reader has gone (`eval-pipeline diff … | head`), so the
    command still finishes and its exit code still carries the verdict."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self.closed_by_reader = False

    def write(self, text: str) -> int:
        if not self.closed_by_reader:
            try:
                self.inner.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.closed_by_reader:
            try:
                self.inner.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self.closed_by_reader = True
        # Python flushes the real stdout again at exit; point it at /dev/null so that cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, self.inner.fileno())
        os.close(devnull)


def _run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    # Here, not at the top: `--help` and parsing import no pydantic model.
    with cyclic_gc_paused():  # the models it builds live to the end
        from eval_pipeline.core.inputs.loading import InputError
        from eval_pipeline.core.inputs.text import one_line

    try:
        return func(args)
    except InputError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"{len(exc.problems)} problem(s) found", file=sys.stderr)
        return exc.exit_code
    except EvalPipelineError as exc:  # every deliberate error: its class says the exit code
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        first = (str(exc).strip().splitlines() or [""])[0]
        hint = "" if args.debug else "; rerun with --debug for the traceback"
        print(f"internal error: {type(exc).__name__}: {first}{hint}", file=sys.stderr)
        return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    with cyclic_gc_paused():  # every command's module and the parser live to the end
        args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    stdout = sys.stdout
    sys.stdout = _PipeSafeStdout(stdout)
    try:
        return _run(func, args)
    finally:
        sys.stdout.flush()
        sys.stdout = stdout
