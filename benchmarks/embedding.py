"""The bundled embedder against its floor: the same model file run by bare onnxruntime.

For each length bucket (short queries, one-paragraph summaries, long entity texts) the floor is
`InferenceSession.run` alone on batches that are already tokenised and padded, with
onnxruntime's default threading; ours is `LocalMiniLMEmbedder.embed` on the same texts, everything
included (tokenising, batching, pooling, the hop to a worker thread). Throughput in texts/s, best of
three passes of each, so a neighbour's burst of CPU does not decide the ratio. Target: ours ≥ 0.9×
the floor in every bucket.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from benchmarks.synthetic import sample_sentence
from benchmarks.table import Row
from eval_pipeline.providers.local_embedder import (
    BATCH_SIZE,
    MAX_TOKENS,
    VENDORED_TOKENIZER,
    LocalMiniLMEmbedder,
    installed_model_path,
)

TARGET = 0.9
PASSES = 3
# (bucket, words per text, texts): about 12, 60 and 230 tokens.
BUCKETS = (("short", 8, 1024), ("medium", 45, 512), ("long", 170, 256))


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


def _floor_batches(texts: Sequence[str]) -> list[dict[str, np.ndarray]]:
    tokenizer = Tokenizer.from_file(str(VENDORED_TOKENIZER))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    encodings = sorted(tokenizer.encode_batch(list(texts)), key=lambda e: len(e.ids))
    batches = []
    for start in range(0, len(encodings), BATCH_SIZE):
        chunk = encodings[start : start + BATCH_SIZE]
        width = max(len(e.ids) for e in chunk)
        feeds = {name: np.zeros((len(chunk), width), dtype=np.int64) for name in ("ids", "mask", "types")}
        for row, e in enumerate(chunk):
            feeds["ids"][row, : len(e.ids)] = e.ids
            feeds["mask"][row, : len(e.ids)] = e.attention_mask
            feeds["types"][row, : len(e.ids)] = e.type_ids
        names = {"ids": "input_ids", "mask": "attention_mask", "types": "token_type_ids"}
        batches.append({names[k]: v for k, v in feeds.items()})
    return batches


def _run_all(session: ort.InferenceSession, batches: Sequence[dict[str, np.ndarray]]) -> None:
    for batch in batches:
        session.run(None, batch)


def _embed(embedder: LocalMiniLMEmbedder, texts: list[str]) -> None:
    asyncio.run(embedder.embed(texts, "document"))


def rows() -> list[Row]:
    session = ort.InferenceSession(str(installed_model_path()), providers=["CPUExecutionProvider"])
    inputs = {i.name for i in session.get_inputs()}
    embedder = LocalMiniLMEmbedder()
    embedder.load()
    out = []
    for bucket, words, count in BUCKETS:
        texts = _texts(words, count)
        batches = [{k: v for k, v in b.items() if k in inputs} for b in _floor_batches(texts)]
        floor = _best_rate(count, partial(_run_all, session, batches))
        ours = _best_rate(count, partial(_embed, embedder, texts))
        ratio = ours / floor
        print(f"embedding {bucket}: ours {ours:.0f}/s, bare onnxruntime {floor:.0f}/s ({ratio:.2f}×)")
        out.append(
            Row(
                "embedding",
                f"{bucket} texts (~{words} words), {count} texts, batches of {BATCH_SIZE}",
                f"ours {ratio:.2f}× bare onnxruntime",
                f"≥ {TARGET}×",
                ratio >= TARGET,
                f"ours {ours:.0f} texts/s, floor {floor:.0f} texts/s (best of {PASSES})",
            )
        )
    return out
