"""The code version's memo (core/code_version.py): it answers only for exactly the code and the
installed packages it was computed from, never for changed ones."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from eval_pipeline.core import code_version as cv
from eval_pipeline.core.file_stats import RACY_NS


class _Versions:
    """A stand-in for hashing the source: counts its calls, one new version a call."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return f"v{self.calls}"


def _later() -> int:
    """A moment past the racy window of every file written so far, after the filesystem's coarse
    clock (a tick of up to 10 ms) moved on, so an edit made next gets a new ctime."""
    time.sleep(0.05)
    return time.time_ns() + 2 * RACY_NS


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "mod.py").write_text("X = 1\n")
    (package / "top.py").write_text("Y = 1\n")
    site = tmp_path / "site"
    site.mkdir()
    (tmp_path / "cache").mkdir()
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    return package


def test_the_memo_answers_for_the_same_files_and_packages_only(package: Path, tmp_path: Path) -> None:
    memo, versions = tmp_path / "cache" / "memo.json", _Versions()
    assert cv.memoised_version(package, memo, versions, _later()) == "v1"
    assert cv.memoised_version(package, memo, versions, _later()) == "v1"  # memoised
    assert versions.calls == 1
    # One source line edited in place, the same size, its mtime put back: the ctime moved.
    mod = package / "sub" / "mod.py"
    before = mod.stat()
    mod.write_text("X = 2\n")
    os.utime(mod, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert mod.stat().st_size == before.st_size
    assert cv.memoised_version(package, memo, versions, _later()) == "v2"
    # A source file added, then renamed: other code each time.
    (package / "new.py").write_text("Z = 1\n")
    assert cv.memoised_version(package, memo, versions, _later()) == "v3"
    (package / "new.py").rename(package / "sub" / "new.py")
    assert cv.memoised_version(package, memo, versions, _later()) == "v4"
    # A package installed on the import path, then removed.
    dist_info = tmp_path / "site" / "somelib-1.0.dist-info"
    dist_info.mkdir()
    assert cv.memoised_version(package, memo, versions, _later()) == "v5"
    dist_info.rmdir()
    assert cv.memoised_version(package, memo, versions, _later()) == "v6"
    # Another import path: distributions may be found elsewhere (a Path on it too).
    sys.path.append(tmp_path / "elsewhere")  # type: ignore[arg-type]
    assert cv.memoised_version(package, memo, versions, _later()) == "v7"
    assert cv.memoised_version(package, memo, versions, _later()) == "v7"
    assert versions.calls == 7


def test_a_version_computed_within_the_racy_window_is_not_memoised(package: Path, tmp_path: Path) -> None:
    memo, versions = tmp_path / "cache" / "memo.json", _Versions()
    # At the moment the last file was written (not the wall clock, which a loaded machine may
    # have moved on by seconds): one could change again within the same tick, unseen.
    written = max(f.stat().st_mtime_ns for f in package.rglob("*.py"))
    assert cv.memoised_version(package, memo, versions, written) == "v1"
    assert not memo.exists()
    assert cv.memoised_version(package, memo, versions, _later()) == "v2"
    assert memo.exists()


def test_a_memo_that_is_not_one_is_ignored_and_none_is_written_without_bytecode(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memo, versions = tmp_path / "cache" / "memo.json", _Versions()
    for junk in (b"", b"[1]", b'{"key": 1, "version": "x"}', b"\xff"):
        memo.write_bytes(junk)
        assert cv.memoised_version(package, memo, versions, _later()) == f"v{versions.calls}"
    assert cv.memoised_version(package, memo, versions, _later()) == "v4"
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert cv._memo_file() is None
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    tag = sys.implementation.cache_tag
    assert cv._memo_file() == Path(cv.__file__).parent / "__pycache__" / f"code_version.{tag}.json"


def test_the_memoised_version_is_the_computed_one(tmp_path: Path) -> None:
    def computed() -> str:
        return cv.version_of(cv._PACKAGE, cv.dependency_versions())

    memo = tmp_path / "memo.json"
    first = cv.memoised_version(cv._PACKAGE, memo, computed, _later())
    assert cv.memoised_version(cv._PACKAGE, memo, lambda: "not computed", _later()) == first == computed()
