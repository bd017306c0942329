"""The writability check: a missing folder is not made (its nearest existing ancestor is probed),
a probe file leaves no trace, and each way a folder can refuse becomes one line naming it with the
exit code of its kind."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from eval_pipeline.core.writable import (
    NoSpace,
    NotWritable,
    _refusal,
    require_writable,
    require_writable_file,
)


def test_checked_folders_are_left_as_they_were(tmp_path: Path) -> None:
    existing = tmp_path / "cache"
    existing.mkdir()
    require_writable([("results folder", tmp_path / "results" / "deep"), ("cache folder", existing)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"] and list(existing.iterdir()) == []


def test_the_first_folder_that_refuses_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "storage"
    blocker.write_text("")
    with pytest.raises(NotWritable, match=r"^storage folder .*/storage/x: a file is in the way") as caught:
        require_writable([("cache folder", tmp_path / "cache"), ("storage folder", blocker / "x")])
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    ("code", "kind", "exit_code", "says"),
    [
        (errno.ENOSPC, NoSpace, 3, "no space left on its disk"),
        (errno.EDQUOT, NoSpace, 3, "no space left on its disk"),
        (errno.EROFS, NotWritable, 2, "not writable (Read-only file system)"),
        (errno.EACCES, NotWritable, 2, "not writable (Permission denied)"),
        (errno.EEXIST, NotWritable, 2, "a file is in the way (a folder is needed)"),
    ],
)
def test_each_refusal_says_why_with_its_exit_code(
    code: int, kind: type[Exception], exit_code: int, says: str
) -> None:
    error = _refusal("results folder", Path("/r"), OSError(code, os.strerror(code)))
    assert isinstance(error, kind) and error.exit_code == exit_code
    assert str(error) == f"results folder /r: {says}"


def test_a_file_target_may_need_new_folders_but_no_folder_in_its_place(tmp_path: Path) -> None:
    require_writable_file("--junit file", tmp_path / "junit.xml")  # an existing, writable folder
    require_writable_file("--junit file", tmp_path / "gone" / "j.xml")  # made when it is written
    assert list(tmp_path.iterdir()) == []  # the check makes neither file nor folder
    (tmp_path / "plain").write_text("")
    with pytest.raises(NotWritable, match=r"^--junit file .*/plain: "):
        require_writable_file("--junit file", tmp_path / "plain" / "j.xml")
    (tmp_path / "dir.xml").mkdir()
    with pytest.raises(NotWritable, match=r"dir.xml: a folder is in the way \(a file is needed\)$"):
        require_writable_file("--junit file", tmp_path / "dir.xml")
