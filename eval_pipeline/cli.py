"""The `eval-pipeline` command.

Exit codes are a contract: 0 ran and gates met, 1 a gate failed, 2 bad input or configuration,
3 could not evaluate or an internal error (one line; `--debug` shows the traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from eval_pipeline.cli_errors import EXIT_ERROR, EXIT_INPUT, EXIT_OK, UsageError, print_warnings
from eval_pipeline.core.banks import Mechanism
from eval_pipeline.core.json_schemas import json_schemas
from eval_pipeline.core.loading import InputError, Problem
from eval_pipeline.core.run_document import DocumentError
from eval_pipeline.core.validation import load_validated
from eval_pipeline.providers.models import ConfigError
from eval_pipeline.providers.pricing import PricingError


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kb", type=Path, default=Path("kb"), help="KB directory or single file")
    p.add_argument("--banks-dir", type=Path, default=Path("test_banks"), help="test banks directory")


def cmd_validate(args: argparse.Namespace) -> int:
    warnings: list[Problem] = []
    kb, banks = load_validated(args.kb, args.banks_dir, warnings)
    print_warnings(warnings)
    counts = banks.counts()
    parts = ", ".join(f"{m.value} {counts[m]}" for m in Mechanism if m in counts)
    print(
        f"OK: kb {kb.kb_version} ({kb.content_hash[:12]}, {len(kb.entities)} entities); "
        f"banks: {parts}; history: {len(banks.history)} file(s); {len(warnings)} warning(s)"
    )
    return EXIT_OK


def cmd_schemas(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for name, schema in json_schemas().items():
        (out / f"{name}.schema.json").write_text(json.dumps(schema, indent=2) + "\n")
    print(f"wrote {len(json_schemas())} schemas to {out}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    # Heavy imports (dagster, onnxruntime) stay inside the commands that need them.
    from eval_pipeline.commands import add_run_commands
    from eval_pipeline.commands_calibrate import add_calibrate_commands
    from eval_pipeline.commands_diff import add_diff_commands

    parser = argparse.ArgumentParser(
        prog="eval-pipeline", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    sub = parser.add_subparsers(dest="command", required=True)
    add_run_commands(sub)
    add_diff_commands(sub)
    add_calibrate_commands(sub)

    p = sub.add_parser("validate", help="load the KB and banks and cross-check them")
    _add_data_args(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("schemas", help="write JSON Schemas for the KB, bank and history files")
    p.add_argument("--out", type=Path, default=Path("schemas"))
    p.set_defaults(func=cmd_schemas)
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
    try:
        return func(args)
    except InputError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"{len(exc.problems)} problem(s) found", file=sys.stderr)
        return EXIT_INPUT
    except (UsageError, ConfigError, PricingError, DocumentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
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
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    stdout = sys.stdout
    sys.stdout = _PipeSafeStdout(stdout)
    try:
        return _run(func, args)
    finally:
        sys.stdout.flush()
        sys.stdout = stdout


if __name__ == "__main__":
    sys.exit(main())
