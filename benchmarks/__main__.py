"""`python -m benchmarks [--quick] [NAME ...]` (`make bench`, `make bench-all`): run the named
benchmarks, the quick ones, or every one, and write their rows as one table to
benchmarks/results.md, headed by the machine and its load. The table is rewritten as each
benchmark finishes, so an interrupted pass keeps the rows it made.

A benchmark is a module of this package with a function `rows() -> list[Row]` (benchmarks.table);
adding one is adding such a module, and `QUICK = True` in it puts it in the quick pass (a minute
or two each at most). Exits 1 when a row missed its target.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.table import Row, load_average, machine, render

RESULTS = Path(__file__).with_name("results.md")


@dataclass(frozen=True)
class Benchmark:
    rows: Callable[[], list[Row]]
    quick: bool


def benchmarks() -> dict[str, Benchmark]:
    """Every module of this package that has `rows()`, by name."""
    found: dict[str, Benchmark] = {}
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        rows = getattr(module, "rows", None)
        if callable(rows):
            found[info.name] = Benchmark(rows, bool(getattr(module, "QUICK", False)))
    return found


def _write(header: str, rows: Sequence[Row]) -> str:
    text = f"# Benchmark results\n\n{header}\n\n{render(rows)}\n"
    RESULTS.write_text(text, encoding="utf-8")
    return text


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these benchmarks")
    parser.add_argument("--quick", action="store_true", help="only the quick benchmarks (QUICK = True)")
    args = parser.parse_args(argv)
    available = benchmarks()
    names = list(args.names) or sorted(n for n, b in available.items() if b.quick or not args.quick)
    unknown = [n for n in names if n not in available]
    if unknown:
        print(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(available)}", file=sys.stderr)
        return 2
    header = machine()
    print(header, flush=True)
    rows: list[Row] = []
    for done, name in enumerate(names, 1):
        rows += available[name].rows()
        left = names[done:]
        status = f", still to run: {', '.join(left)}" if left else f", {load_average()} at the end"
        text = _write(header + status, rows)
    print(f"\n{text}\nwritten to {RESULTS}")
    return 1 if any(row.met is False for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
