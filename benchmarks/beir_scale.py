"""A 5,000-passage synthetic BEIR set (50 queries, 80 graded judgments each) imported and run
through `local-minilm`, as ratios to a numpy floor.

- Cold: `eval-pipeline import-beir` then `eval-pipeline run --model local-minilm` on an empty
  embedding cache, each in a process of its own, against the floor in a process of its own: parse
  corpus.jsonl, queries.jsonl and the qrels with `json`, embed every passage and query with bare
  onnxruntime (the embedder's session options and batch plan, mean pooling in numpy), the top
  100 of each query by `argpartition`. Target: ours ≤ 1.2× the floor. Peak memory (`VmHWM`) of
  each is stated.
- Warm: the same run again in this process against the floor without the embedding (the vectors
  from .npy files), in turns (`benchmarks.interleave`). Target: ours ≤ 2× the floor's median.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.interleave import interleaved
from benchmarks.synthetic import sample_sentence
from benchmarks.table import Row, load_average
from eval_pipeline.core.inputs.beir_project import SUMMARY_CHARS, first_sentence

PASSAGES, QUERIES, JUDGED = 5_000, 50, 80
DEPTH = 100
MODEL = "local-minilm"
COLD_LIMIT, WARM_LIMIT = 1.2, 2.0
_PEAK = (
    "import re\n"
    "print('PEAK', int(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)))"
)


def write_beir(root: Path, seed: int = 11) -> Path:
    """corpus.jsonl, queries.jsonl and qrels/test.tsv: graded gains 0-3, ids of the awkward kind."""
    rng = random.Random(seed)
    (root / "qrels").mkdir(parents=True)
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as corpus:
        for n in range(PASSAGES):
            record = {"_id": f"doc:{n}/p", "title": sample_sentence(rng, 4), "text": sample_sentence(rng, 60)}
            corpus.write(json.dumps(record) + "\n")
    with (root / "queries.jsonl").open("w", encoding="utf-8") as queries:
        for q in range(QUERIES):
            queries.write(json.dumps({"_id": f"q{q}", "text": sample_sentence(rng, 9)}) + "\n")
    rows = ["query-id\tcorpus-id\tscore"]
    for q in range(QUERIES):
        for n in rng.sample(range(PASSAGES), JUDGED):
            rows.append(f"q{q}\tdoc:{n}/p\t{rng.randint(0, 3)}")
    (root / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


def _parse(src: Path) -> tuple[list[str], list[str], list[str]]:
    """Passage ids, the text the KB entity of each passage embeds (title, first sentence, text:
    the same texts as ours, each embedded alone) and the judged queries' texts."""
    ids, texts = [], []
    for line in (src / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        ids.append(record["_id"])
        title, text = record["title"], record["text"]
        texts.append(f"{title}\n{first_sentence(text, SUMMARY_CHARS)}\n{text}")
    judged = {row.split("\t")[0] for row in (src / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    queries = [json.loads(line) for line in (src / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    return ids, texts, [q["text"] for q in queries if q["_id"] in judged]


def _top(matrix: np.ndarray, queries: np.ndarray) -> list[list[int]]:
    scores = queries.astype(np.float64) @ matrix.astype(np.float64).T  # as the numeric contract scores
    top = np.argpartition(scores, -DEPTH, axis=1)[:, -DEPTH:]
    order = np.argsort(-np.take_along_axis(scores, top, 1), axis=1)
    return np.take_along_axis(top, order, 1).tolist()  # type: ignore[no-any-return]


def floor_cold(src: Path, out: Path) -> None:
    """Parse, embed with bare onnxruntime, rank; the vectors kept for the warm floor."""
    import onnxruntime as ort

    from benchmarks.embedding import _encodings, _feeds
    from eval_pipeline.providers.local_embedder import (
        _session_options,
        installed_model_path,
        mean_pool_normalised,
    )

    ids, texts, queries = _parse(src)
    session = ort.InferenceSession(
        str(installed_model_path()), _session_options(), providers=["CPUExecutionProvider"]
    )
    inputs = {i.name for i in session.get_inputs()}

    def embed(batch_texts: list[str]) -> np.ndarray:
        encodings = _encodings(batch_texts)
        vectors = np.empty((len(batch_texts), 0), dtype=np.float32)
        for row, encoding in enumerate(encodings):  # a text at a time, as the contract has it
            feeds = _feeds([encoding])
            hidden = session.run(None, {k: v for k, v in feeds.items() if k in inputs})[0]
            pooled = mean_pool_normalised(hidden, feeds["attention_mask"])
            if vectors.shape[1] == 0:
                vectors = np.empty((len(batch_texts), pooled.shape[1]), dtype=np.float32)
            vectors[row] = pooled[0]
        return vectors

    matrix, query_vectors = embed(texts), embed(queries)
    ranked = _top(matrix, query_vectors)
    np.save(out / "passages.npy", matrix)
    np.save(out / "queries.npy", query_vectors)
    (out / "floor.json").write_text(json.dumps([[ids[i] for i in r] for r in ranked]), encoding="utf-8")


def floor_warm(src: Path, vectors: Path) -> None:
    ids, _, _ = _parse(src)
    ranked = _top(np.load(vectors / "passages.npy"), np.load(vectors / "queries.npy"))
    (vectors / "floor.json").write_text(json.dumps([[ids[i] for i in r] for r in ranked]), encoding="utf-8")


def _process(code: str, cwd: Path) -> tuple[float, float]:
    """Wall seconds and peak GiB of a fresh interpreter running `code`."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\n{_PEAK}"], cwd=cwd, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    peak = [line for line in done.stdout.splitlines() if line.startswith("PEAK ")]
    if not peak:
        raise RuntimeError(f"{code[:60]}… failed: {done.stderr.strip()[-500:]}")
    return wall, int(peak[0].split()[1]) / 2**20


def _cli(argv: list[str]) -> str:
    return (
        "import sys\nfrom eval_pipeline.cli import main\n"
        f"code = main({argv!r})\nassert code in (0, 1), code"  # 1: a gate, which may well fail
    )


def rows() -> list[Row]:
    repo = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="eval-beir-") as tmp:
        root = Path(tmp)
        src = write_beir(root / "beir")
        project = root / "project"
        project.mkdir()
        (root / "floor").mkdir()
        floor_code = (
            f"import sys; sys.path.insert(0, {str(repo)!r})\nfrom pathlib import Path\n"
            "from benchmarks.beir_scale import floor_cold\n"
            f"floor_cold(Path({str(src)!r}), Path({str(root / 'floor')!r}))"
        )
        run = ["run", "--model", MODEL, "--banks", "semantic", "--kb", "kb", "--banks-dir", "banks"]
        run += ["--models-file", "models.yaml", "--cache-dir", ".cache", "--results-dir", "results"]
        imported = _cli(["import-beir", str(src), "--kb", "kb", "--banks-dir", "banks"])
        floor_wall, floor_peak = _process(floor_code, repo)
        import_wall, import_peak = _process(imported, project)
        run_wall, run_peak = _process(_cli(run), project)
        ours = import_wall + run_wall
        print(
            f"beir cold: ours {ours:.1f} s (import {import_wall:.1f} s), floor {floor_wall:.1f} s", flush=True
        )
        cold = ours / floor_wall
        out = [
            Row(
                "beir_scale",
                f"import + cold run, {PASSAGES:,}-passage synthetic BEIR set, {QUERIES} queries, "
                f"{MODEL} at depth {DEPTH}, vs parse + embed + top-k (own processes)",
                f"ours {cold:.2f}× the floor",
                f"≤ {COLD_LIMIT}×",
                cold <= COLD_LIMIT,
                f"ours {ours:.1f} s (import {import_wall:.1f} s, peak {import_peak:.2f} GiB; "
                f"run {run_wall:.1f} s, "
                f"peak {run_peak:.2f} GiB); floor {floor_wall:.1f} s, peak {floor_peak:.2f} GiB; "
                f"load {load_average()} after",
            )
        ]
        from eval_pipeline.cli import main

        def warm_run() -> None:
            with contextlib.chdir(project), contextlib.redirect_stdout(io.StringIO()):
                if main(run) not in (0, 1):
                    raise RuntimeError("the warm run failed")

        warm_run()  # imports done and caches open, as the floor's are
        timings = interleaved({"ours": warm_run, "floor": lambda: floor_warm(src, root / "floor")}, rounds=5)
        warm = timings["ours"].median / timings["floor"].median
        print(f"beir warm: ours {timings['ours'].text()}, floor {timings['floor'].text()}", flush=True)
        out.append(
            Row(
                "beir_scale",
                f"warm run of the same set, {MODEL}, vs parse + top-k on stored vectors "
                "(in process, interleaved)",
                f"ours {warm:.2f}× the floor",
                f"≤ {WARM_LIMIT}×",
                warm <= WARM_LIMIT,
                f"ours {timings['ours'].text()}; floor {timings['floor'].text()}; "
                f"load {load_average()} after",
            )
        )
    return out
