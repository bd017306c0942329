"""`--junit FILE` for `run` and `diff`: the flag, its check before any work, and the write."""

from __future__ import annotations

import argparse
from pathlib import Path

from eval_pipeline.cli.paths import path_arg

ROLE = "--junit file"


def junit_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--junit",
        type=path_arg,
        metavar="FILE",
        help=f"also write {what} as JUnit XML to FILE (missing folders are made), for CI test reporters",
    )


def check_junit(path: Path | None) -> None:
    """Before any evaluation or read: a FILE that cannot be written is bad input (exit 2)."""
    from eval_pipeline.core.writable import require_writable_file

    if path is not None:
        require_writable_file(ROLE, path)


def write_junit(path: Path | None, xml: str) -> None:
    from eval_pipeline.core.fileio import atomic_write_text

    if path is not None:
        atomic_write_text(path, xml)
