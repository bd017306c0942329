"""Input files stay inside their folders: an entity file inside the KB folder, a bank, rules or
history file inside `--banks-dir`, links included. A link that leads elsewhere (to
`/etc/passwd`, to another project) is refused before it is opened, naming where it leads."""

from __future__ import annotations

import os
from pathlib import Path


def real_folder(folder: Path) -> str:
    """`folder` with every link resolved, to compare files against (see `outside`)."""
    return os.path.realpath(folder)


def outside(file: Path, folder: str) -> str | None:
    """Where `file` really is, if that is outside the resolved `folder`; else None."""
    target = os.path.realpath(file)
    return None if target == folder or target.startswith(folder.rstrip(os.sep) + os.sep) else target


def outside_problem(target: str, what: str) -> str:
    return f"leads to {target}, outside {what}: input files must be inside their folder"
