"""The distilled static embedder: its table is the contextual model's, token by token; a text is
the normalised mean of its tokens' rows; a torn table file is never used."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from eval_pipeline.providers.local_embedder import (
    DIM,
    VENDORED_TOKENIZER,
    LocalMiniLMEmbedder,
    installed_model_path,
    runtime,
)
from eval_pipeline.providers.models import ConfigError, load_models
from eval_pipeline.providers.static_embedder import (
    NAME,
    StaticMiniLMEmbedder,
    distil,
    read_table,
    table_path,
)

TOKENIZER = runtime(installed_model_path(), VENDORED_TOKENIZER).tokenizer
VOCAB = TOKENIZER.get_vocab_size()


def test_distilled_rows_are_the_contextual_model_on_each_token_alone() -> None:
    rows = distil(installed_model_path(), VENDORED_TOKENIZER, vocab=2100)
    words = ["the", "a", "is", "and"]  # whole-word tokens with ids inside the distilled slice
    ids = [TOKENIZER.token_to_id(w) or 0 for w in words]
    assert all(0 < i < 2100 for i in ids)
    contextual = asyncio.run(LocalMiniLMEmbedder().embed(words, "document"))
    assert rows.shape == (2100, DIM)
    np.testing.assert_allclose(rows[ids], np.asarray(contextual.vectors), atol=1e-4)


def test_a_text_is_the_normalised_mean_of_its_token_rows(tmp_path: Path) -> None:
    table = np.random.default_rng(5).normal(size=(VOCAB, DIM)).astype(np.float32)
    np.save(table_path(tmp_path), table)
    embedder = StaticMiniLMEmbedder(tmp_path)
    texts = ["the rent is late", "", "the rent is late"]
    vectors = asyncio.run(embedder.embed(texts, "query")).vectors
    ids = TOKENIZER.encode("the rent is late", add_special_tokens=False).ids
    expected = table[ids].mean(axis=0)
    np.testing.assert_allclose(vectors[0], expected / np.linalg.norm(expected), rtol=1e-5)
    assert np.array_equal(vectors[0], vectors[2]) and not vectors[1].any()  # empty text: no direction


def test_a_torn_or_foreign_table_file_is_not_used(tmp_path: Path) -> None:
    path = table_path(tmp_path)
    path.write_bytes(b"\x93NUMPY torn")
    assert read_table(path, VOCAB) is None
    np.save(path, np.zeros((10, DIM), dtype=np.float32))  # another vocabulary
    assert read_table(path, VOCAB) is None
    assert read_table(tmp_path / "absent.npy", VOCAB) is None
    assert NAME in path.name


def test_models_file_names_the_static_model_or_fails_on_an_unknown_one(tmp_path: Path) -> None:
    file = tmp_path / "models.yaml"
    model = "models:\n  s:\n    embedder: {{kind: local, model_id: {}}}\n    reranker: {{kind: hybrid}}\n"
    file.write_text(model.format(NAME))
    assert load_models(file)["s"].stages()[0].model_id == NAME
    file.write_text(model.format("other"))
    with pytest.raises(ConfigError, match=r"model 's': field 'embedder': .*'static-minilm-l6'"):
        load_models(file)
