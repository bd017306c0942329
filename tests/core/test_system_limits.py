"""What ran out is said with the path and the limit; what did not run out is left alone."""

from __future__ import annotations

import errno
import os
import resource
from pathlib import Path

import pytest

from eval_pipeline.core.system_limits import (
    STEP_FILES,
    OutOfResources,
    exhausted,
    require_spare_files,
    sqlite_exhausted,
)


def _os_error(number: int, filename: str | None = None) -> OSError:
    return (
        OSError(number, os.strerror(number), filename) if filename else OSError(number, os.strerror(number))
    )


def test_a_full_disk_names_the_file_being_written_and_the_space_left(tmp_path: Path) -> None:
    said = exhausted(_os_error(errno.ENOSPC), tmp_path / "results.json")  # a failed sync names no file
    assert said is not None and said.exit_code == 3
    assert str(said).startswith(f"no space left on the disk writing {tmp_path / 'results.json'} (")
    assert str(said).endswith(" bytes free)")
    assert str(exhausted(_os_error(errno.EDQUOT, str(tmp_path)))).startswith("the disk quota is used up")


def test_the_open_file_limit_names_the_file_and_the_limit() -> None:
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    said = exhausted(_os_error(errno.EMFILE, "kb"))
    assert str(said) == f"too many open files opening kb: the open-file limit (ulimit -n) is {soft:,}"


def test_an_error_that_is_not_a_limit_is_left_as_it_is() -> None:
    assert exhausted(_os_error(errno.ENOENT, "missing.json")) is None
    assert exhausted(_os_error(errno.EACCES, "locked.json")) is None


def test_sqlite_messages_are_told_apart_by_the_limits_in_force(tmp_path: Path) -> None:
    database = tmp_path / "index.db"
    assert str(sqlite_exhausted("database or disk is full", database)).startswith(
        f"no space left on the disk writing {database}"
    )
    # Far from the open-file limit, and with no file-size limit set: not this module's to say.
    assert sqlite_exhausted("unable to open database file", database) is None
    if resource.getrlimit(resource.RLIMIT_FSIZE)[0] == resource.RLIM_INFINITY:
        assert sqlite_exhausted("disk I/O error", database) is None


def test_a_run_step_is_not_begun_without_files_to_spare() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_now = len(os.listdir("/proc/self/fd"))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + STEP_FILES + 16, hard))
        require_spare_files("shared")  # enough: nothing said
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + STEP_FILES // 2, hard))
        with pytest.raises(OutOfResources) as said:
            require_spare_files("shared")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    limit = open_now + STEP_FILES // 2
    assert str(said.value).startswith(
        f"too many open files to run shared: the open-file limit (ulimit -n) is {limit:,}, "
    )
    assert str(said.value).endswith(f"are open and a run step needs up to {STEP_FILES} more")
