"""`init DIR`: a new project, the way in for a new domain: a KB (manifest with the project's
name, one entity per load mode), banks with one example test each, a models file with the two
offline models and the gates the project keeps, and empty results/ and storage/ folders of its
own. Run from DIR, every command finds them by default; the example validates and evaluates as it
stands."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from eval_pipeline.cli.exit_status import EXIT_OK, UsageError
from eval_pipeline.cli.flags import path_arg

# The example project, as the files it is made of (the manifest, which names the project, and the
# gates are written here).
EXAMPLE = Path(__file__).with_name("new_project")
EXAMPLE_MODELS = EXAMPLE / "models.yaml"


def with_new_gates(models: str) -> str:
    """A new project's models file: its models, then the gates a new project keeps."""
    from eval_pipeline.core.verdicts.project_gates import NEW_PROJECT_GATES, gates_section

    return f"{models}\n{gates_section(NEW_PROJECT_GATES)}"


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "init",
        help="scaffold a new project (KB, banks, models, results, storage)",
        description="Create a new project in DIR: a small KB, one test of each bank, a models file "
        "with the offline models, and its own results and storage folders; `eval-pipeline run` in "
        "DIR then evaluates it.",
    )
    p.add_argument("dir", type=path_arg, help="a new or empty folder")
    p.add_argument("--name", help="the project's name (default: the folder's name)")


def cmd_init(args: argparse.Namespace) -> int:
    import yaml

    from eval_pipeline.core.fileio import atomic_write_text

    root: Path = args.dir
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise UsageError(f"{root}: exists and is not an empty folder; init writes a new project")
    name = args.name or root.resolve().name
    # Contents only (copytree would copy each folder's mode too): the new files and folders are
    # the user's to edit, whatever the installed copies' modes.
    for source in sorted(EXAMPLE.rglob("*")):
        target = root / source.relative_to(EXAMPLE)
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            shutil.copyfile(source, target)
    manifest = {"kb_version": "0.1", "name": name, "description": "A new eval_pipeline project."}
    atomic_write_text(root / "kb" / "manifest.yaml", yaml.safe_dump(manifest, sort_keys=False))
    atomic_write_text(root / "models.yaml", with_new_gates(EXAMPLE_MODELS.read_text(encoding="utf-8")))
    for folder in ("test_banks/semantic/history", "results", "storage", "calibration"):
        (root / folder).mkdir()
    print(f"project '{name}' in {root}: edit kb/ and test_banks/, then from there `eval-pipeline run`")
    return EXIT_OK
