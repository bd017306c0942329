"""Scale: the semantic bank of synthetic KBs of 1,000 / 2,500 / 5,000 entities with 2,000 / 5,000 /
10,000 tests through `local-minilm`, each a ratio to a plain numpy floor; and `validate` on the
5,000-entity KB.

- Cold: `eval-pipeline run --banks semantic --model local-minilm` in a process of its own on an
  empty embedding cache, reporting wall time and peak resident memory (its own `VmHWM`). Target:
  peak ≤ 1 GiB at 5,000 × 10,000.
- Warm: the same run in this process (imports done, cache filled by the cold run) against the
  floor, in turns (`benchmarks.interleave`): parse the KB's YAML files (libyaml) and the bank's
  JSON, load the entity and query vectors from plain `.npy` files, one matrix product for all
  queries, the top 15 of each by `argpartition`, write the candidates as JSON. Target: ours ≤ 2×
  the floor's median at every size.
- Marginal cost of a test: the warm run of the whole bank and of its first half, back to back in
  each round; the median of the rounds' differences over the tests it adds. Target: at 5,000
  entities ≤ 1.2× that at 1,000 (flat in the KB's size). The floor's own, likewise, beside it.
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

import numpy as np
import yaml

from benchmarks.interleave import Timing, interleaved
from benchmarks.synthetic import write_corpus
from benchmarks.table import Row, load_average

SIZES = ((1_000, 2_000), (2_500, 5_000), (5_000, 10_000))
MODEL = "local-minilm"
WARM_LIMIT = 2.0  # ours over the numpy floor
MARGINAL_LIMIT = 1.2  # marginal cost a test at the largest size over that at the smallest
MEMORY_LIMIT_GIB = 1.0
VALIDATE_LIMIT_S = 3.0
K = 15
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


def _in_process(argv: list[str]) -> None:
    from eval_pipeline.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    if code not in (0, 1):
        raise RuntimeError(f"{' '.join(argv)} exited {code}")


def export_vectors(kb: Path, banks_dir: Path, cache: Path, out: Path) -> None:
    """The floor's inputs, written once untimed: the entity and query vectors the cold run stored,
    as plain .npy files (entity rows in entity_id order, query rows in bank order)."""
    from eval_pipeline.core.inputs.kb import LoadMode
    from eval_pipeline.core.inputs.validation import load_validated
    from eval_pipeline.providers.cache import EmbeddingStore
    from eval_pipeline.providers.local_embedder import LocalMiniLMEmbedder

    loaded, banks = load_validated(kb, banks_dir)
    entities = sorted(loaded.with_mode(LoadMode.SEMANTIC), key=lambda e: e.entity_id)
    store, name = EmbeddingStore(cache), LocalMiniLMEmbedder().name
    found = store.get_many(name, [e.content_hash for e in entities])
    np.save(out / "entities.npy", np.stack([found[e.content_hash] for e in entities]))
    keys = [EmbeddingStore.query_key("query", t.prompt) for t in banks.semantic_tests]
    queries = store.get_many(name, keys)
    np.save(out / "queries.npy", np.stack([queries[k] for k in keys]))


def numpy_floor(kb: Path, bank: Path, vectors: Path, out: Path) -> None:
    """Parse, one product, top 15 a query, write: the least a warm evaluation could do."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    entities = sorted(
        (yaml.load(f.read_text(encoding="utf-8"), Loader=loader) for f in (kb / "entities").glob("*.yaml")),
        key=lambda e: e["entity_id"],
    )
    tests = json.loads(bank.read_text(encoding="utf-8"))["tests"]
    matrix, queries = np.load(vectors / "entities.npy"), np.load(vectors / "queries.npy")
    scores = queries @ matrix.T
    top = np.argpartition(scores, -K, axis=1)[:, -K:]
    ranked = np.take_along_axis(top, np.argsort(-np.take_along_axis(scores, top, 1), axis=1), 1)
    ids = [e["entity_id"] for e in entities]
    rows = [
        {
            "test_id": t["test_id"],
            "candidates": [{"entity_id": ids[i], "score": float(scores[n, i])} for i in r],
        }
        for n, (t, r) in enumerate(zip(tests, ranked.tolist(), strict=True))
    ]
    out.write_text(json.dumps({"semantic": rows}, indent=2), encoding="utf-8")


def half_bank(banks: Path, out: Path) -> Path:
    """A copy of the banks folder whose semantic bank keeps its first half of the tests."""
    (out / "semantic").mkdir(parents=True)
    bank = json.loads((banks / "semantic" / "bank.json").read_text(encoding="utf-8"))
    bank["tests"] = bank["tests"][: len(bank["tests"]) // 2]
    (out / "semantic" / "bank.json").write_text(json.dumps(bank), encoding="utf-8")
    (out / "banks.yaml").write_text((banks / "banks.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    return out


def _rounds(tests: int) -> int:
    """9 at the largest size, more where a run is shorter (27 at 1,000 × 2,000): the smallest
    size's marginal cost is a difference of ~0.2 s between runs whose spread reaches 50% on this
    machine, and it divides every marginal ratio."""
    return min(27, 9 * SIZES[-1][1] // tests)


def _per_test_ms(timing: Timing, tests: int) -> str:
    return f"{timing.median / tests * 1000:.2f}"


def warm_row(entities: int, tests: int, ours: Timing, floor: Timing) -> Row:
    ratio = ours.median / floor.median
    return Row(
        "scale",
        f"warm semantic, {entities:,} entities × {tests:,} tests, {MODEL}, vs the numpy floor",
        f"ours {ratio:.2f}× the floor ({_per_test_ms(ours, tests)} vs {_per_test_ms(floor, tests)} ms/test)",
        f"≤ {WARM_LIMIT}×",
        ratio <= WARM_LIMIT,
        f"ours {ours.text()}; floor {floor.text()}; load {load_average()} after",
    )


def marginal_s(whole: Timing, half: Timing, added: int) -> float:
    """Seconds a test adds: the median over rounds of that round's whole bank less its first half.
    The two ran back to back in each round, so a load that came or went between rounds moves
    both; the difference of the two medians took each from a round of its own, and its noise
    (±10% on ~0.2 ms a test) decided the row."""
    return statistics.median(w - h for w, h in zip(whole.seconds, half.seconds, strict=True)) / added


def half_vectors(vectors: Path, tests: int) -> Path:
    """The floor's inputs for the first half of the bank (its queries' vectors come first)."""
    half = vectors / "half-vectors"
    half.mkdir()
    (half / "entities.npy").hardlink_to(vectors / "entities.npy")  # the same entities
    np.save(half / "queries.npy", np.load(vectors / "queries.npy")[: tests // 2])
    return half


def marginal_row(small: tuple[int, float, float], large: tuple[int, float, float]) -> Row:
    """(entities, ours, the floor's) seconds a test adds, at the smallest and the largest size."""
    ratio = large[1] / small[1]
    floor = large[2] / small[2]
    return Row(
        "scale",
        f"marginal cost of a test, warm, at {large[0]:,} vs {small[0]:,} entities",
        f"{ratio:.2f}× ({large[1] * 1000:.2f} vs {small[1] * 1000:.2f} ms/test)",
        f"≤ {MARGINAL_LIMIT}×",
        ratio <= MARGINAL_LIMIT,
        f"(whole bank − its first half) ÷ the tests added, median of the rounds' differences; "
        f"the floor's own {floor:.2f}× ({large[2] * 1000:.2f} vs {small[2] * 1000:.2f} ms/test)",
    )


def rows() -> list[Row]:
    out: list[Row] = []
    marginal: list[tuple[int, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="eval-scale-") as tmp:
        for entities, tests in SIZES:
            root = Path(tmp) / f"{entities}"
            kb, banks = write_corpus(root, entities, tests)
            half = half_bank(banks, root / "half")
            common = ["--kb", str(kb), "--cache-dir", str(root / "cache")]
            common += [
                "--models-file",
                str(Path("models.yaml").resolve()),
                "--results-dir",
                str(root / "res"),
                "--storage-dir",
                str(root / "storage"),
            ]
            run = ["run", "--banks", "semantic", "--model", MODEL, *common]
            wall, peak = _measure([*run, "--banks-dir", str(banks)], root)
            print(f"scale {entities}/{tests} cold: {wall:.1f} s, peak {peak:.2f} GiB", flush=True)
            largest = entities == SIZES[-1][0]
            out.append(
                Row(
                    "scale",
                    f"cold semantic, {entities:,} entities × {tests:,} tests, {MODEL}, own process",
                    f"peak {peak:.2f} GiB",
                    f"≤ {MEMORY_LIMIT_GIB} GiB" if largest else "",
                    peak <= MEMORY_LIMIT_GIB if largest else None,
                    f"{wall:.1f} s wall (embedding every entity and query: see the embedding rows)",
                )
            )
            export_vectors(kb, banks, root / "cache", root)
            _in_process([*run, "--banks-dir", str(half)])  # warms this process for the half bank too
            bank, half_bank_file = banks / "semantic" / "bank.json", half / "semantic" / "bank.json"
            timings = interleaved(
                {
                    "ours": partial(_in_process, [*run, "--banks-dir", str(banks)]),
                    "half": partial(_in_process, [*run, "--banks-dir", str(half)]),
                    "floor": partial(numpy_floor, kb, bank, root, root / "floor.json"),
                    "floor half": partial(
                        numpy_floor, kb, half_bank_file, half_vectors(root, tests), root / "floor-half.json"
                    ),
                },
                rounds=_rounds(tests),
            )
            ours, floor = timings["ours"], timings["floor"]
            print(f"scale {entities}/{tests} warm: ours {ours.text()}, floor {floor.text()}", flush=True)
            out.append(warm_row(entities, tests, ours, floor))
            added = tests - tests // 2
            marginal.append(
                (
                    entities,
                    marginal_s(ours, timings["half"], added),
                    marginal_s(floor, timings["floor half"], added),
                )
            )
            if largest:
                wall, _ = _measure(["validate", "--kb", str(kb), "--banks-dir", str(banks)], root)
                out.append(
                    Row(
                        "scale",
                        f"validate, {entities:,}-entity KB + {tests:,}-test bank",
                        f"{wall:.2f} s",
                        f"≤ {VALIDATE_LIMIT_S} s",
                        wall <= VALIDATE_LIMIT_S,
                        "own process, imports included",
                    )
                )
    out.append(marginal_row(marginal[0], marginal[-1]))
    return out


if __name__ == "__main__":
    from benchmarks.table import machine, render

    print(machine(), flush=True)
    print(render(rows()))
