"""`import-beir SRC --kb OUT_KB --banks-dir OUT_BANKS [--split test]`: a BEIR folder as a new
project (KB, semantic bank, and a models file beside the KB, where `init` puts it), written at
once or not at all (core/inputs/beir_project.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from eval_pipeline.cli.exit_status import EXIT_OK, UsageError
from eval_pipeline.cli.flags import path_arg
from eval_pipeline.cli.init import EXAMPLE_MODELS, with_new_gates

# Standard cutoffs such as R@100 need 100 candidates per query, not the 15 a chat assistant's
# reranker is shown.
IMPORTED_CANDIDATE_DEPTH = 100


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "import-beir",
        help="turn a BEIR folder into a KB, a semantic bank and a models file",
        description="Each passage becomes a KB entity and each judged query a semantic test with its graded "
        "gains; ids the KB cannot hold are mapped reversibly and kept as source_id. Nothing is written "
        "unless the whole import succeeds.",
    )
    p.add_argument(
        "src", type=path_arg, help="the BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv"
    )
    p.add_argument("--kb", type=path_arg, required=True, help="the KB folder to write (new or empty)")
    p.add_argument(
        "--banks-dir", type=path_arg, required=True, help="the banks folder to write (new or empty)"
    )
    p.add_argument(
        "--split", type=split_arg, default="test", help="which qrels/<split>.tsv to import (default: test)"
    )
    p.add_argument("--name", help="the project's name (default: the BEIR folder's name)")


def split_arg(text: str) -> str:
    """`type=` of `--split`: one file name in qrels/, never a path."""
    from eval_pipeline.core.inputs.beir import split_problem

    problem = split_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def imported_models() -> str:
    """The offline models of `init`, each retrieving IMPORTED_CANDIDATE_DEPTH candidates."""
    import yaml

    data = yaml.safe_load(EXAMPLE_MODELS.read_text(encoding="utf-8"))
    for entry in data["models"].values():
        entry["candidate_depth"] = IMPORTED_CANDIDATE_DEPTH
    header = "# The imported project's retrieval configurations; see `eval-pipeline models` and the docs.\n"
    return with_new_gates(header + yaml.safe_dump(data, sort_keys=False))


# A project's name is shown on every line that names the project; longer is a mistake.
MAX_NAME = 200


def cmd_import_beir(args: argparse.Namespace) -> int:
    from eval_pipeline.core.control_chars import one_line
    from eval_pipeline.core.inputs.beir_project import ImportTargets, import_beir

    src: Path = args.src
    targets = ImportTargets(args.kb, args.banks_dir, args.kb.parent / "models.yaml")
    name = args.name or src.resolve().name
    if len(name) > MAX_NAME:
        raise UsageError(f"--name: {len(name):,} characters; a project's name has at most {MAX_NAME}")
    counts = import_beir(src, args.split, name, targets, imported_models())
    if counts.leftovers_removed:
        print(f"removed {counts.leftovers_removed} temporary folder(s) left by an interrupted import")
    print(
        f"imported '{one_line(name)}': {counts.documents} documents ({counts.mapped_documents} ids "
        f"mapped), {counts.tests} tests ({counts.mapped_queries} ids mapped), {counts.judgments} "
        f"judgments ({counts.zero_gain_judgments} with gain 0); skipped {counts.unjudged_queries} "
        f"queries without judgments and {counts.unrelevant_queries} whose judgments all have gain 0"
    )
    print(f"wrote {targets.kb_dir}, {targets.banks_dir} and {targets.models_file}")
    return EXIT_OK
