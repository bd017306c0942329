"""`.ci/run` installs chromium (for the HTML report's browser check) and redis-server (the Celery
executor test's broker) when they are missing and apt-get exists, then runs `make test`; with
both present it goes straight to `make test`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import REPO


def _present(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def _run(tmp_path: Path, chromium: Path, apt_status: int = 0, redis: Path | None = None) -> list[str]:
    """.ci/run with apt-get, make and id replaced by recorders (as root): the commands it ran."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir(exist_ok=True)
    for name, status in (("apt-get", apt_status), ("make", 0)):
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\nexit {status}\n')
    (bin_dir / "id").write_text("#!/bin/sh\necho 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    redis = redis or _present(tmp_path / "redis-server")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "CHROMIUM": str(chromium),
        "REDIS_SERVER": str(redis),
    }
    subprocess.run([str(REPO / ".ci" / "run")], env=env, check=True, timeout=60)
    return log.read_text().splitlines()


def test_chromium_is_installed_when_missing_then_make_test_runs(tmp_path: Path) -> None:
    assert _run(tmp_path, tmp_path / "no-chromium") == [
        "apt-get update -qq",
        "apt-get install -y --no-install-recommends chromium",
        "make test",
    ]


def test_with_chromium_present_it_only_runs_make_test(tmp_path: Path) -> None:
    assert _run(tmp_path, _present(tmp_path / "chromium")) == ["make test"]


def test_redis_server_is_installed_when_missing(tmp_path: Path) -> None:
    chromium = _present(tmp_path / "chromium")
    assert _run(tmp_path, chromium, redis=tmp_path / "no-redis-server") == [
        "apt-get update -qq",
        "apt-get install -y --no-install-recommends redis-server",
        "make test",
    ]


def test_a_failed_install_still_runs_make_test(tmp_path: Path) -> None:
    # No package index reachable: the browser check skips (saying why); the rest of CI still runs.
    assert _run(tmp_path, tmp_path / "no-chromium", apt_status=100) == ["apt-get update -qq", "make test"]
