"""The version of the code that produced a result: this package's source and the versions of the
libraries it depends on (an onnxruntime or pydantic upgrade may change what a run computes).

An installed release and a working copy with one edited line get different versions, so a
result made by other code is never mistaken for what this code would make.

Hashing the source and reading the dependencies' metadata cost every run ~12 ms; a memo beside the
package's bytecode (written only where the interpreter writes bytecode) keeps the version with what
it was computed from: every source file's name, size, mtime_ns, ctime_ns, inode and device, the
import path, and the same of each of its folders (installing, upgrading or removing a package adds
or removes a folder or file there, which moves the folder's mtime). The memo answers only while all
of that is exactly as it was; a file changed within `RACY_NS` of the computation could change again
unseen within one tick of the filesystem's clock, so such a version is not memoised (git's "racy"
rule, as `core/inputs/kb_cache.py`). The limit: a metadata file edited in place, its folder kept,
goes unseen (installers replace a distribution's folder).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import sys
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

from eval_pipeline.core.file_stats import Stat, racy, stat_row
from eval_pipeline.core.fileio import atomic_write_bytes

DISTRIBUTION = "eval-pipeline"
_PACKAGE = Path(__file__).resolve().parent.parent
MEMO_FORMAT = 1


def _requirement_name(requirement: str) -> str | None:
    """The distribution a requirement names, unless it is an extra's (a dev tool)."""
    if "extra ==" in requirement:
        return None
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    return match.group(0) if match else None


def _header(metadata: str, field: str) -> list[str]:
    """A field's values in a metadata text's headers (before the first blank line), in order.
    Version and Requires-Dist take one line each; the email parser, its import included, cost
    every run ~10 ms for the same values."""
    name = field.lower()
    return [
        value.strip()
        for key, colon, value in (line.partition(":") for line in metadata.partition("\n\n")[0].splitlines())
        if colon and key.lower() == name
    ]


def installed_version(name: str) -> str:
    """`importlib.metadata.version(name)`, read from the metadata's headers only: parsed whole, a
    long description (pydantic's changelog: 140 kB) cost every run ~20 ms."""
    dist = importlib.metadata.distribution(name)
    text = dist.read_text("METADATA")
    if not text:  # PKG-INFO and older forms: as the standard library reads them
        return dist.version
    version = _header(text, "Version")
    return version[0] if version else dist.version


def _requirements() -> list[str]:
    """`importlib.metadata.requires(DISTRIBUTION)`, from the headers as `installed_version` reads."""
    dist = importlib.metadata.distribution(DISTRIBUTION)
    text = dist.read_text("METADATA")
    return _header(text, "Requires-Dist") if text else dist.requires or []


def dependency_versions() -> list[str]:
    try:
        requirements = _requirements()
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return []
    out = []
    for name in sorted(filter(None, map(_requirement_name, requirements))):
        try:
            out.append(f"{name}=={installed_version(name)}")
        except importlib.metadata.PackageNotFoundError:
            out.append(f"{name}==absent")
    return out


def version_of(package: Path, dependencies: list[str]) -> str:
    """sha256 over a package's Python source (path and content) and its dependencies' versions."""
    digest = hashlib.sha256()
    for file in sorted(package.rglob("*.py")):
        digest.update(file.relative_to(package).as_posix().encode())
        digest.update(b"\0")
        digest.update(file.read_bytes())
    for line in dependencies:
        digest.update(line.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def _source_stats(package: Path) -> list[Stat]:
    """Every Python source file under `package` (the files `version_of` hashes), by its path
    relative to it: a file added, removed or renamed changes the list, an edited one its stat."""
    out: list[Stat] = []
    folders = [""]
    while folders:
        relative = folders.pop()
        with os.scandir(package / relative) as entries:
            for entry in entries:
                name = f"{relative}/{entry.name}" if relative else entry.name
                if entry.name.endswith(".py") and entry.is_file():
                    out.append(stat_row(name, entry.stat()))
                elif entry.is_dir() and entry.name != "__pycache__":
                    folders.append(name)
    return sorted(out)


def _import_path() -> list[str]:
    # As text: a tool may put a Path (or anything os.fspath takes) on sys.path.
    return [os.fsdecode(entry) for entry in sys.path]


def _path_stats(entries: list[str]) -> list[Stat]:
    """The import path's folders, where distributions and their metadata are found."""
    out: list[Stat] = []
    for entry in entries:
        with contextlib.suppress(OSError):
            out.append(stat_row(entry, os.stat(entry or ".")))
    return out


def memoised_version(package: Path, memo: Path | None, compute: Callable[[], str], now_ns: int) -> str:
    """`compute()`, or the version `memo` holds when it was computed from exactly what is there
    now (see above)."""
    path = _import_path()
    sources, folders = _source_stats(package), _path_stats(path)
    key = [MEMO_FORMAT, str(package), path, sources, folders]
    if memo is not None:
        with contextlib.suppress(OSError, ValueError):
            stored = json.loads(memo.read_bytes())
            version = stored.get("version") if isinstance(stored, dict) and stored.get("key") == key else None
            if isinstance(version, str):
                return version
    version = compute()
    if memo is not None and not racy([*sources, *folders], now_ns):
        # A memo that cannot be written is a slower next run, not a failed one.
        with contextlib.suppress(OSError):
            atomic_write_bytes(memo, json.dumps({"key": key, "version": version}).encode())
    return version


def _memo_file() -> Path | None:
    """Beside this module's bytecode (`sys.pycache_prefix` honoured), where bytecode is written."""
    if sys.dont_write_bytecode:
        return None
    return Path(importlib.util.cache_from_source(__file__)).with_suffix(".json")


@cache
def code_version() -> str:
    """This installation's version (computed once per process, memoised between processes)."""
    return memoised_version(
        _PACKAGE, _memo_file(), lambda: version_of(_PACKAGE, dependency_versions()), time.time_ns()
    )
