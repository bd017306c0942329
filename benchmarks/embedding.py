"""The bundled embedder against its floor: the same model file run by bare onnxruntime.

For each length bucket (short queries, one-paragraph summaries, long entity texts) the floor is
`InferenceSession.run` alone on each text, already tokenised, in a session with the embedder's
own options (threads, no spinning, arena growth); ours is `LocalMiniLMEmbedder.embed` on the same
texts, everything included (tokenising, pooling, the hop to a worker thread). Both run a text at
a time, as the numeric contract needs (a text embeds the same alone as in any batch); a last row
shows what that costs against padded batches of 32. The two take turns in this process
(`benchmarks.interleave`, five rounds), so load lands on both; throughput in texts/s from each
median. Target: ours ≥ 0.97× the floor, or within the floor's own spread of it (ours no slower
than the floor's slowest round). Each row also gives the CPU time (every thread of the process) of
ours over the floor's: the work ours adds, which a neighbour's load does not move as it moves wall
time.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from benchmarks.interleave import interleaved
from benchmarks.synthetic import sample_sentence
from benchmarks.table import Row, load_average
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.providers.local_embedder import (
    MAX_TOKENS,
    VENDORED_TOKENIZER,
    LocalMiniLMEmbedder,
    _session_options,
    installed_model_path,
)

# In `make bench`'s quick pass (benchmarks/__main__.py).
QUICK = True

REPO = Path(__file__).resolve().parent.parent
TARGET = 0.97
PASSES = 3
# (bucket, words per text, texts): about 12, 60 and 230 tokens.
BUCKETS = (("short", 8, 1024), ("medium", 45, 512), ("long", 170, 256))
PADDED_BATCH = 32


def _texts(words: int, count: int) -> list[str]:
    rng = random.Random(words)
    return [sample_sentence(rng, words) for _ in range(count)]


def _best_rate(count: int, run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(PASSES):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return count / best


def _encodings(texts: Sequence[str]) -> list[Encoding]:
    tokenizer = Tokenizer.from_file(str(VENDORED_TOKENIZER))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    return tokenizer.encode_batch(list(texts))


def _feeds(chunk: Sequence[Encoding]) -> dict[str, np.ndarray]:
    width = max(len(e.ids) for e in chunk)
    feeds = {name: np.zeros((len(chunk), width), dtype=np.int64) for name in ("ids", "mask", "types")}
    for row, e in enumerate(chunk):
        feeds["ids"][row, : len(e.ids)] = e.ids
        feeds["mask"][row, : len(e.ids)] = e.attention_mask
        feeds["types"][row, : len(e.ids)] = e.type_ids
    names = {"ids": "input_ids", "mask": "attention_mask", "types": "token_type_ids"}
    return {names[k]: v for k, v in feeds.items()}


def _one_at_a_time(texts: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """Each text tokenised as its own single-row input."""
    return [_feeds([e]) for e in _encodings(texts)]


def _padded_batches(texts: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """Sorted by length, then PADDED_BATCH rows at a time, each padded to its longest."""
    encodings = sorted(_encodings(texts), key=lambda e: len(e.ids))
    return [_feeds(encodings[at : at + PADDED_BATCH]) for at in range(0, len(encodings), PADDED_BATCH)]


def _run_all(session: ort.InferenceSession, batches: Sequence[dict[str, np.ndarray]]) -> None:
    for batch in batches:
        session.run(None, batch)


def _embed(embedder: LocalMiniLMEmbedder, texts: list[str]) -> None:
    asyncio.run(embedder.embed(texts, "document"))


def _cpu_counted(cpu: list[float], run: Callable[[], object]) -> Callable[[], None]:
    """`run`, adding the process's CPU seconds it took to `cpu`."""

    def counted() -> None:
        started = time.process_time()
        run()
        cpu.append(time.process_time() - started)

    return counted


def rows() -> list[Row]:
    session = ort.InferenceSession(
        str(installed_model_path()), _session_options(), providers=["CPUExecutionProvider"]
    )
    inputs = {i.name for i in session.get_inputs()}
    embedder = LocalMiniLMEmbedder()
    embedder.load()
    out = []
    for bucket, words, count in BUCKETS:
        texts = _texts(words, count)
        batches = [{k: v for k, v in b.items() if k in inputs} for b in _one_at_a_time(texts)]
        cpu: dict[str, list[float]] = {"floor": [], "ours": []}
        timings = interleaved(
            {
                "floor": _cpu_counted(cpu["floor"], partial(_run_all, session, batches)),
                "ours": _cpu_counted(cpu["ours"], partial(_embed, embedder, texts)),
            }
        )
        floor, ours = timings["floor"], timings["ours"]
        ratio = floor.median / ours.median  # throughput: texts/s is count over the time
        cpu_ratio = statistics.median(cpu["ours"]) / statistics.median(cpu["floor"])
        met = ratio >= TARGET or ours.median <= max(floor.seconds)
        print(
            f"embedding {bucket}: ours {count / ours.median:.0f}/s, "
            f"floor {count / floor.median:.0f}/s ({ratio:.2f}×); CPU time ours {cpu_ratio:.3f}× the floor's"
        )
        out.append(
            Row(
                "embedding",
                f"{bucket} texts (~{words} words), {count} texts, one at a time, interleaved",
                f"ours {ratio:.2f}× bare onnxruntime",
                f"≥ {TARGET}× or within the floor's spread",
                met,
                f"ours {count / ours.median:.0f} texts/s, spread {ours.spread:.0%}; floor "
                f"{count / floor.median:.0f} texts/s, spread {floor.spread:.0%} (medians of "
                f"{len(floor.seconds)} rounds); CPU time ours {cpu_ratio:.3f}× the floor's (medians); "
                f"load {load_average()} after",
            )
        )
    out.append(_batch_cost_row(session, inputs))
    return out


def _batch_cost_row(session: ort.InferenceSession, inputs: set[str]) -> Row:
    """What embedding a text at a time costs on real, mixed lengths: the sample KB's texts and
    prompts, bare onnxruntime both ways, so only the batching differs."""
    kb, banks = load_validated(REPO / "kb", REPO / "test_banks")
    texts = [e.embedding_text() for e in kb.entities] + [t.prompt for t in banks.semantic_tests]

    def rate(batches: list[dict[str, np.ndarray]]) -> float:
        kept = [{k: v for k, v in b.items() if k in inputs} for b in batches]
        return _best_rate(len(texts), partial(_run_all, session, kept))

    alone, padded = rate(_one_at_a_time(texts)), rate(_padded_batches(texts))
    print(f"embedding sample texts: one at a time {alone:.0f}/s, padded batches {padded:.0f}/s")
    return Row(
        "embedding",
        f"the sample's {len(texts)} KB texts and prompts: one at a time vs padded batches of {PADDED_BATCH}",
        f"{alone / padded:.2f}× the texts/s",
        detail=f"one at a time {alone:.0f} texts/s, padded batches {padded:.0f} texts/s (bare onnxruntime, "
        f"best of {PASSES})",
    )
