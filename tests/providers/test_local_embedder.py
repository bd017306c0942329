"""The bundled MiniLM embedder: file integrity, vector shape, determinism, meaning."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from tokenizers import Tokenizer

from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.providers.base import Vectors
from eval_pipeline.providers.local_embedder import (
    DIM,
    MAX_TOKENS,
    NAME,
    VENDORED_TOKENIZER,
    LocalMiniLMEmbedder,
    ModelFileError,
    _session_options,
    installed_model_path,
)
from tests.conftest import REPO


@pytest.fixture(scope="module")
def embedder() -> LocalMiniLMEmbedder:
    return LocalMiniLMEmbedder()


def embed(embedder: LocalMiniLMEmbedder, texts: list[str]) -> Vectors:
    return asyncio.run(embedder.embed(texts, "document")).vectors


def test_tampered_tokenizer_is_refused(tmp_path: Path) -> None:
    tampered = tmp_path / "minilm_tokenizer.json"
    shutil.copyfile(VENDORED_TOKENIZER, tampered)
    with tampered.open("a", encoding="utf-8") as f:
        f.write(" ")
    with pytest.raises(ModelFileError, match="sha256") as err:
        LocalMiniLMEmbedder(tokenizer_path=tampered).load()
    assert str(tampered) in str(err.value)


def test_missing_model_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelFileError, match="not found"):
        LocalMiniLMEmbedder(model_path=tmp_path / "model.onnx").load()


def test_vectors_are_unit_float32_and_deterministic(embedder: LocalMiniLMEmbedder) -> None:
    texts = ["How do I talk to my ex about the holiday schedule?", "Gray rock method", "x"]
    first, second = embed(embedder, texts), embed(embedder, texts)
    assert embedder.name == NAME
    assert first.shape == (3, DIM) and first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(first, second)


def test_input_type_is_ignored_and_empty_input_is_empty(embedder: LocalMiniLMEmbedder) -> None:
    text = ["My daughter refuses to go to her father's house"]
    query = asyncio.run(embedder.embed(text, "query")).vectors
    assert np.array_equal(query, embed(embedder, text))
    assert embed(embedder, []).shape == (0, DIM)


def test_a_vector_does_not_depend_on_its_batch(embedder: LocalMiniLMEmbedder) -> None:
    # 40 texts of different lengths span two batches and get reordered by length internally.
    texts = [f"message {i}: " + "the kids came back upset again " * (i % 7) for i in range(40)]
    together = embed(embedder, texts)
    alone = np.vstack([embed(embedder, [t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-6)


def test_long_inputs_are_truncated_not_rejected(embedder: LocalMiniLMEmbedder) -> None:
    long_text = "custody schedule " * 600  # far past 256 tokens
    assert embed(embedder, [long_text]).shape == (1, DIM)


def test_related_sentences_score_higher_than_unrelated(embedder: LocalMiniLMEmbedder) -> None:
    anchor, close, far = embed(
        embedder,
        [
            "My ex keeps ignoring the custody schedule we agreed on.",
            "The other parent does not follow our parenting plan.",
            "Preheat the oven and bake the bread for forty minutes.",
        ],
    )
    assert float(anchor @ close) > float(anchor @ far) + 0.2


def _domain_texts(domain: Path) -> list[str]:
    """The second domain's entity texts and prompts, plus lengths that span several batches, an
    empty text and one past the truncation limit."""
    return _texts(domain / "kb.yaml", domain / "banks")


def _texts(kb_path: Path, banks_dir: Path) -> list[str]:
    kb, banks = load_validated(kb_path, banks_dir)
    texts = [e.embedding_text() for e in kb.entities] + [t.prompt for t in banks.semantic_tests]
    return texts + [" ".join(texts[i : i + 2]) for i in range(12)] + ["", " ".join(texts * 20)]


def _bare_onnxruntime(texts: list[str]) -> Vectors:
    """The floor, written independently: each text alone through its own session (so no padding
    at all), mean of its token vectors in float64, unit length."""
    tokenizer = Tokenizer.from_file(str(VENDORED_TOKENIZER))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    session = ort.InferenceSession(str(installed_model_path()), _session_options())
    names = {i.name for i in session.get_inputs()}
    out = []
    for text in texts:
        enc = tokenizer.encode(text)
        feeds = {
            "input_ids": np.array([enc.ids], dtype=np.int64),
            "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
            "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
        }
        hidden = session.run(None, {k: v for k, v in feeds.items() if k in names})[0][0]
        mean = hidden.astype(np.float64).mean(axis=0)
        out.append(mean / np.linalg.norm(mean))
    return np.array(out, dtype=np.float32)


def test_vectors_match_bare_onnxruntime_text_by_text(embedder: LocalMiniLMEmbedder, tenant: Path) -> None:
    texts = _domain_texts(tenant)
    np.testing.assert_allclose(embed(embedder, texts), _bare_onnxruntime(texts), atol=1e-6, rtol=0)


@pytest.mark.parametrize("domain", ["sample", "tenant"])
def test_a_text_embeds_the_same_alone_as_among_others(
    embedder: LocalMiniLMEmbedder, domain: str, tenant: Path
) -> None:
    # The numeric contract covers embeddings: a narrowed run embeds one prompt, a full run all of
    # them, and a stored vector must not depend on which ran first.
    texts = _domain_texts(tenant) if domain == "tenant" else _texts(REPO / "kb", REPO / "test_banks")
    together = embed(embedder, texts)
    for i in range(0, len(texts), max(1, len(texts) // 12)):
        assert embed(embedder, [texts[i]]).tobytes() == together[i].tobytes()
    assert embed(embedder, texts[::-1]).tobytes() == together[::-1].tobytes()
