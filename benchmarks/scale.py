"""Scale: the semantic bank of synthetic KBs of 1,000 / 2,500 / 5,000 entities with 2,000 / 5,000 /
10,000 tests, through both offline models, cold (empty embedding cache) and warm (the same run
again); and `validate` on the 5,000-entity KB.

Each measurement is `eval-pipeline run --banks semantic --model local-minilm --model local-hybrid`
in a process of its own, which reports its wall time and its peak resident memory
(its own `VmHWM`). Targets: time per test within ±25% of the rows' median (linear growth), cold and warm;
peak memory < 2 GiB at every size; `validate` on 5,000 entities ≤ 3 s (its own process, imports
included).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.synthetic import write_corpus
from benchmarks.table import Row

SIZES = ((1_000, 2_000), (2_500, 5_000), (5_000, 10_000))
LINEAR_BAND = 0.25
MEMORY_LIMIT_GIB = 2.0
VALIDATE_LIMIT_S = 3.0
MODELS = ("--model", "local-minilm", "--model", "local-hybrid")
# The peak is the process's own high-water mark (VmHWM): Linux carries `ru_maxrss` over from the
# parent through fork and exec, so a large benchmark runner would show as every child's peak.
_CHILD = """
import json, re, sys, time
started = time.perf_counter()
from eval_pipeline.cli import main
code = main(sys.argv[1:])
status = open("/proc/self/status").read()
print(json.dumps({"code": code, "wall": time.perf_counter() - started,
                  "peak_kib": int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1))}))
"""


def _measure(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds and peak GiB of one CLI invocation in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv], cwd=cwd, capture_output=True, text=True, check=False
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    if report["code"] not in (0, 1):  # 1: a gate, which synthetic tests may well fail
        raise RuntimeError(f"{argv[0]} exited {report['code']}: {done.stderr.strip()[-500:]}")
    return report["wall"], report["peak_kib"] / 2**20


def linear_rows(label: str, runs: list[tuple[int, int, float, float]]) -> list[Row]:
    per_test = [wall / tests for _, tests, wall, _ in runs]
    middle = statistics.median(per_test)
    out = []
    for (entities, tests, wall, peak), each in zip(runs, per_test, strict=True):
        drift = each / middle - 1
        out.append(
            Row(
                "scale",
                f"{label}: {entities:,} entities × {tests:,} tests, 2 local models",
                f"{each * 1000:.1f} ms/test ({drift:+.0%} vs median); peak {peak:.2f} GiB",
                f"±{LINEAR_BAND:.0%}; < {MEMORY_LIMIT_GIB} GiB",
                abs(drift) <= LINEAR_BAND and peak < MEMORY_LIMIT_GIB,
                f"{wall:.1f} s wall",
            )
        )
    return out


def rows() -> list[Row]:
    cold: list[tuple[int, int, float, float]] = []
    warm: list[tuple[int, int, float, float]] = []
    validate_row: Row | None = None
    with tempfile.TemporaryDirectory(prefix="eval-scale-") as tmp:
        for entities, tests in SIZES:
            root = Path(tmp) / f"{entities}"
            kb, banks = write_corpus(root, entities, tests)
            base = ["run", "--banks", "semantic", *MODELS, "--kb", str(kb), "--banks-dir", str(banks)]
            base += ["--cache-dir", str(root / "cache"), "--models-file", str(Path("models.yaml").resolve())]
            for label, out in (("cold", cold), ("warm", warm)):
                wall, peak = _measure([*base, "--results-dir", str(root / label)], root)
                print(f"scale {entities}/{tests} {label}: {wall:.1f} s, peak {peak:.2f} GiB", flush=True)
                out.append((entities, tests, wall, peak))
            if entities == SIZES[-1][0]:
                wall, _ = _measure(["validate", "--kb", str(kb), "--banks-dir", str(banks)], root)
                validate_row = Row(
                    "scale",
                    f"validate, {entities:,}-entity KB + {tests:,}-test bank",
                    f"{wall:.2f} s",
                    f"≤ {VALIDATE_LIMIT_S} s",
                    wall <= VALIDATE_LIMIT_S,
                    "own process, imports included",
                )
    assert validate_row is not None
    return [*linear_rows("cold", cold), *linear_rows("warm", warm), validate_row]
