"""`.ci/run` installs chromium (for the HTML report's browser check) when it is missing and
apt-get exists, then runs `make test`; with chromium present it goes straight to `make test`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import REPO


def _run(tmp_path: Path, chromium: Path, apt_status: int = 0) -> list[str]:
    """.ci/run with apt-get, make and id replaced by recorders (as root): the commands it ran."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir(exist_ok=True)
    for name, status in (("apt-get", apt_status), ("make", 0)):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\nexit {status}\n')
    (bin_dir / "id").write_text("#!/bin/sh\necho 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "CHROMIUM": str(chromium)}
    subprocess.run([str(REPO / ".ci" / "run")], env=env, check=True, timeout=60)
    return log.read_text().splitlines()


def test_chromium_is_installed_when_missing_then_make_test_runs(tmp_path: Path) -> None:
    assert _run(tmp_path, tmp_path / "no-chromium") == [
        "apt-get update -qq",
        "apt-get install -y --no-install-recommends chromium",
        "make test",
    ]


def test_with_chromium_present_it_only_runs_make_test(tmp_path: Path) -> None:
    present = tmp_path / "chromium"
    present.write_text("#!/bin/sh\n")
    present.chmod(0o755)
    assert _run(tmp_path, present) == ["make test"]


def test_a_failed_install_still_runs_make_test(tmp_path: Path) -> None:
    # No package index reachable: the browser check skips (saying why); the rest of CI still runs.
    assert _run(tmp_path, tmp_path / "no-chromium", apt_status=100) == ["apt-get update -qq", "make test"]
