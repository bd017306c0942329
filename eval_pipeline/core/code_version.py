"""The version of the code that produced a result: this package's source and the versions of the
libraries it depends on (an onnxruntime or pydantic upgrade may change what a run computes).

An installed release and a working copy with one edited line get different versions, so a
result made by other code is never mistaken for what this code would make.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
from functools import cache
from pathlib import Path

DISTRIBUTION = "eval-pipeline"
_PACKAGE = Path(__file__).resolve().parent.parent


def _requirement_name(requirement: str) -> str | None:
    """The distribution a requirement names, unless it is an extra's (a dev tool)."""
    if "extra ==" in requirement:
        return None
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    return match.group(0) if match else None


def dependency_versions() -> list[str]:
    try:
        requirements = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return []
    out = []
    for name in sorted(filter(None, map(_requirement_name, requirements))):
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
