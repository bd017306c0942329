"""`validate` and `schemas`: check the input files, and give editors JSON Schemas for them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.exit_status import EXIT_OK, print_warnings
from eval_pipeline.cli.flags import add_flags, path_arg

if TYPE_CHECKING:  # the parser imports this module: the input models load with the command
    from eval_pipeline.core.inputs.loading import Problem


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "validate",
        help="load the KB and banks and cross-check them",
        description="Load the KB, the banks, the rules and the history and cross-check them: every "
        "problem on one line naming file, id and field (exit 2), or one OK line (exit 0).",
    )
    add_flags(p, "--kb", "--banks-dir")

    p = sub.add_parser(
        "schemas",
        help="write JSON Schemas for the KB, bank and history files and the system contract",
        description="Write a JSON Schema for each input file (KB entity, single-file KB, each bank, "
        "the rules, history files) and for the system-under-test request and answer, so editors "
        "validate as you type.",
    )
    p.add_argument(
        "--out", type=path_arg, default=Path("schemas"), help="folder to write them into [schemas]"
    )


def cmd_validate(args: argparse.Namespace) -> int:
    from eval_pipeline.core.control_chars import one_line
    from eval_pipeline.core.inputs.banks import Mechanism
    from eval_pipeline.core.inputs.validation import load_validated

    warnings: list[Problem] = []
    kb, banks = load_validated(args.kb, args.banks_dir, warnings)
    print_warnings(warnings)
    counts = banks.counts()
    parts = ", ".join(f"{m.value} {counts[m]}" for m in Mechanism if m in counts)
    print(
        f"OK: kb {one_line(kb.kb_version)} ({kb.content_hash[:12]}, {len(kb.entities)} entities); "
        f"banks: {parts}; history: {len(banks.history)} file(s); {len(warnings)} warning(s)"
    )
    return EXIT_OK


def cmd_schemas(args: argparse.Namespace) -> int:
    from eval_pipeline.core.inputs.json_schemas import json_schemas

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    for name, schema in json_schemas().items():
        (out / f"{name}.schema.json").write_text(json.dumps(schema, indent=2) + "\n")
    print(f"wrote {len(json_schemas())} schemas to {out}")
    return EXIT_OK
