"""`python -m benchmarks [NAME ...]` (`make bench`): run every benchmark, or the named ones, and
write their rows as one table to benchmarks/results.md, headed by the machine and its load.

A benchmark is a module of this package with a function `rows() -> list[Row]` (benchmarks.table);
adding one is adding such a module. Exits 1 when a row missed its target.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.table import Row, load_average, machine, render

RESULTS = Path(__file__).with_name("results.md")


def benchmarks() -> dict[str, Callable[[], list[Row]]]:
    """Every module of this package that has `rows()`, by name."""
    found: dict[str, Callable[[], list[Row]]] = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        rows = getattr(module, "rows", None)
        if callable(rows):
            found[info.name] = rows
    return found


def main(argv: Sequence[str]) -> int:
    available = benchmarks()
    names = list(argv) or sorted(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        print(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(available)}", file=sys.stderr)
        return 2
    header = machine()
    print(header, flush=True)
    rows = [row for name in names for row in available[name]()]
    header += f", {load_average()} at the end"
    text = f"# Benchmark results\n\n{header}\n\n{render(rows)}\n"
    RESULTS.write_text(text, encoding="utf-8")
    print(f"\n{text}\nwritten to {RESULTS}")
    return 1 if any(row.met is False for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
