"""The one results table every benchmark contributes rows to (`python -m benchmarks`).

A benchmark is a module of this package with a function `rows() -> list[Row]`: it runs, prints
what it likes as it goes, and returns its rows. `Row.met` is None for a row that only informs, else
whether the measurement met its target; `render` lays the rows out as one markdown table under a
header naming the machine.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import astuple, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path


@dataclass(frozen=True)
class Row:
    benchmark: str
    case: str
    measured: str
    target: str = ""
    met: bool | None = None  # None: no target, the row only informs
    detail: str = ""


def render(rows: Sequence[Row]) -> str:
    """The rows as a markdown table, one line each."""
    names = [f.name for f in fields(Row)]
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for row in rows:
        cells = [_cell(value) for value in astuple(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    return str(value).replace("|", "\\|").replace("\n", " ")


def load_average() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def machine() -> str:
    """One line naming the machine and how busy it is right now."""
    return (
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores ({_cpu_model()}), "
        f"Python {platform.python_version()}, load average {load_average()} (1/5/15 min) at start"
    )


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    return platform.processor() or platform.machine()


_SPIN = "import sys\nsys.stdout.write('.')\nsys.stdout.flush()\nwhile True:\n    pass\n"


@contextmanager
def cpu_hogs(count: int) -> Iterator[None]:
    """`count` processes spinning on a core each for the duration: a machine under full load.
    Entered once every hog is spinning."""
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            hogs.append(subprocess.Popen([sys.executable, "-c", _SPIN], stdout=subprocess.PIPE))
        for hog in hogs:
            assert hog.stdout is not None
            hog.stdout.read(1)
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
            if hog.stdout is not None:
                hog.stdout.close()
