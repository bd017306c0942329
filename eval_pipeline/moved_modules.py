"""Old import paths of modules that moved, kept importable without a file at the old place.

A Dagster instance's dagster.yaml names its storage class by module path, and homes made before
the move name `eval_pipeline.defs.instance_storage`. A module file there would put non-definitions
back in `defs/` (which `dg` loads whole) and make `defs/` import `orchestration/`; this finder
instead answers the old name with the new module, imported only when something asks for it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

MOVED = {"eval_pipeline.defs.instance_storage": "eval_pipeline.orchestration.instance_storage"}


# The finder and loader protocols are duck-typed: importing importlib.abc for its base classes
# (and the tempfile, random, ... it pulls in) costs every command, `--help` included, ~10 ms of CPU.
class _Alias:
    def __init__(self, target: str) -> None:
        self._target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self._target)

    def exec_module(self, module: ModuleType) -> None:
        """The module is the target's, already executed."""


class MovedModuleFinder:
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        moved_to = MOVED.get(fullname)
        return (
            None
            if moved_to is None
            else importlib.machinery.ModuleSpec(fullname, cast("Loader", _Alias(moved_to)))
        )


def install() -> None:
    """Add the finder once (idempotent: the package may be reloaded)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
