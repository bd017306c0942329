"""A cheaper offline embedder for very large KBs: static token vectors distilled from the bundled
MiniLM (each token's vector is the model's for `[CLS] token [SEP]`, as model2vec distils).

The table (30,522 × 384) is computed once per machine, model, tokenizer and onnxruntime version,
kept in the cache folder. A text's vector is the unit mean of its tokens' vectors: no transformer
at query time. It is its own model with its own cache entries, never a silent stand-in for the
contextual one; it retrieves worse (docs/models.md).
"""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from eval_pipeline.core.fileio import atomic_write_bytes
from eval_pipeline.core.inputs.kb import sha256_text
from eval_pipeline.providers.base import EmbedResult, InputType, Vectors
from eval_pipeline.providers.local_embedder import (
    DIM,
    MODEL_SHA256,
    TOKENIZER_SHA256,
    VENDORED_TOKENIZER,
    embed_ids,
    installed_model_path,
    runtime,
)

NAME = "static-minilm-l6"
_DISTIL_BATCH = 512
_TABLES: dict[Path, np.ndarray] = {}
_TABLES_LOCK = threading.Lock()


def table_path(cache_dir: Path) -> Path:
    import onnxruntime as ort  # here: a run whose texts are all cached never loads it

    key = sha256_text(f"{MODEL_SHA256}:{TOKENIZER_SHA256}:{ort.__version__}")[:16]
    return cache_dir / f"{NAME}-{key}.npy"


def distil(model_path: Path, tokenizer_path: Path, vocab: int | None = None) -> np.ndarray:
    """One unit vector per token id below `vocab` (default: the whole vocabulary), from the
    contextual model: about 45 s of CPU for the whole vocabulary."""
    rt = runtime(model_path, tokenizer_path)
    vocab = rt.tokenizer.get_vocab_size() if vocab is None else vocab
    cls, sep = rt.tokenizer.token_to_id("[CLS]"), rt.tokenizer.token_to_id("[SEP]")
    out = np.empty((vocab, DIM), dtype=np.float32)
    with rt.lock:
        for start in range(0, vocab, _DISTIL_BATCH):
            ids = np.arange(start, min(start + _DISTIL_BATCH, vocab), dtype=np.int64)
            rows = np.stack([np.full_like(ids, cls), ids, np.full_like(ids, sep)], axis=1)
            out[start : start + len(ids)] = embed_ids(rt, rows)
    return out


def read_table(path: Path, vocab: int) -> np.ndarray | None:
    """The table at `path`, or None when it is absent, torn or not a table of this vocabulary."""
    try:
        table = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return None
    fits = isinstance(table, np.ndarray) and table.shape == (vocab, DIM) and table.dtype == np.float32
    return table if fits else None


def _load_table(path: Path, model_path: Path, tokenizer_path: Path) -> np.ndarray:
    with _TABLES_LOCK:
        if path not in _TABLES:
            vocab = runtime(model_path, tokenizer_path).tokenizer.get_vocab_size()
            table = read_table(path, vocab)
            if table is None:
                table = distil(model_path, tokenizer_path)
                atomic_write_bytes(path, _npy_bytes(table))
            _TABLES[path] = table
        return _TABLES[path]


def _npy_bytes(table: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, table, allow_pickle=False)
    return buffer.getvalue()


class StaticMiniLMEmbedder:
    """`Embedder` over the distilled table; free, offline, deterministic on one machine."""

    name = NAME

    def __init__(
        self, cache_dir: Path, model_path: Path | None = None, tokenizer_path: Path | None = None
    ) -> None:
        self._cache_dir = cache_dir
        self._model_path = model_path or installed_model_path()
        self._tokenizer_path = tokenizer_path or VENDORED_TOKENIZER

    async def embed(self, texts: Sequence[str], input_type: InputType) -> EmbedResult:
        del input_type  # symmetric, like the model it was distilled from
        return EmbedResult(vectors=await asyncio.to_thread(self._embed_sync, list(texts)))

    def _embed_sync(self, texts: list[str]) -> Vectors:
        table = _load_table(table_path(self._cache_dir), self._model_path, self._tokenizer_path)
        tokenizer = runtime(self._model_path, self._tokenizer_path).tokenizer
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, encoding in enumerate(tokenizer.encode_batch(texts, add_special_tokens=False)):
            if encoding.ids:
                out[row] = table[encoding.ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        unit: Vectors = out / np.maximum(norms, 1e-12)
        return unit
