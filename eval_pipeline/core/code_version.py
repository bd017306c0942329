"""The version of the code that produced a result: a hash of this package's source and of its
runtime dependencies' versions (an onnxruntime or pydantic upgrade may change what a run computes),
so a result made by other code, one edited line included, is never taken for this code's.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from functools import cache
from pathlib import Path

DISTRIBUTION = "eval-pipeline"
_PACKAGE = Path(__file__).resolve().parent.parent
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a requirement's distribution name


def dependency_versions() -> list[str]:
    """`name==version` of each runtime dependency (an extra's are dev tools: left out)."""
    try:
        requirements = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return []
    out = []
    named = (_NAME.match(r) for r in requirements if "extra ==" not in r)
    for name in sorted(m.group(0) for m in named if m):
        try:
            out.append(f"{name}=={importlib.metadata.version(name)}")
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


@cache
def code_version() -> str:
    """This installation's version, computed once per process."""
    return version_of(_PACKAGE, dependency_versions())
