"""The `eval-pipeline` command. Exit 0 = done and gates met, 1 = a gate failed, 2 = bad input."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from eval_pipeline.cli_errors import EXIT_INPUT, EXIT_OK, UsageError
from eval_pipeline.core.banks import Mechanism
from eval_pipeline.core.json_schemas import json_schemas
from eval_pipeline.core.loading import InputError
from eval_pipeline.core.validation import load_validated
from eval_pipeline.providers.models import ConfigError
from eval_pipeline.providers.pricing import PricingError


def _add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kb", type=Path, default=Path("kb"), help="KB directory or single file")
    p.add_argument("--banks-dir", type=Path, default=Path("test_banks"), help="test banks directory")


def cmd_validate(args: argparse.Namespace) -> int:
    kb, banks = load_validated(args.kb, args.banks_dir)
    counts = banks.counts()
    parts = ", ".join(f"{m.value} {counts[m]}" for m in Mechanism if m in counts)
    print(
        f"OK: kb {kb.kb_version} ({kb.content_hash[:12]}, {len(kb.entities)} entities); "
        f"banks: {parts}; history: {len(banks.history)} file(s)"
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

    parser = argparse.ArgumentParser(prog="eval-pipeline", description=__doc__)
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except InputError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"{len(exc.problems)} problem(s) found", file=sys.stderr)
        return EXIT_INPUT
    except (UsageError, ConfigError, PricingError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
