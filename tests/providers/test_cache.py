"""Response cache modes and concurrency; the embedding store's reuse of unchanged entities."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from eval_pipeline.core.inputs.kb import Entity, EntityType, LoadMode
from eval_pipeline.providers.base import EmbedResult, InputType
from eval_pipeline.providers.cache import EmbeddingStore, ResponseCache
from eval_pipeline.providers.local_embedder import LocalMiniLMEmbedder
from eval_pipeline.providers.local_rerank import CosineReranker
from eval_pipeline.providers.semantic_pipeline import SemanticPipeline

REQUEST = {"query": "q", "documents": ["a", "b"]}


def test_key_is_canonical_and_covers_every_part() -> None:
    base = ResponseCache.key("anthropic", "claude-haiku-4-5", REQUEST, "v1", 0)
    assert base == ResponseCache.key(
        "anthropic", "claude-haiku-4-5", {"documents": ["a", "b"], "query": "q"}, "v1"
    )
    variants = {
        ResponseCache.key("voyage", "claude-haiku-4-5", REQUEST, "v1", 0),
        ResponseCache.key("anthropic", "claude-sonnet-4-5", REQUEST, "v1", 0),
        ResponseCache.key("anthropic", "claude-haiku-4-5", {**REQUEST, "query": "r"}, "v1", 0),
        ResponseCache.key("anthropic", "claude-haiku-4-5", REQUEST, "v2", 0),
        ResponseCache.key("anthropic", "claude-haiku-4-5", REQUEST, "v1", 1),
    }
    assert len(variants) == 5 and base not in variants


def test_use_mode_reads_back_across_instances(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    key = cache.key("p", "m", REQUEST, "v1")
    assert cache.get(key) is None
    cache.put(key, {"selections": ["a"], "n": 1})
    assert cache.get(key) == {"selections": ["a"], "n": 1}
    assert (cache.hits, cache.misses) == (1, 1)
    assert ResponseCache(tmp_path).get(key) == {"selections": ["a"], "n": 1}
    assert (tmp_path / ResponseCache.FILENAME).is_file()


def test_refresh_mode_never_reads_but_stores_fresh_answers(tmp_path: Path) -> None:
    key = ResponseCache.key("p", "m", REQUEST, "v1")
    ResponseCache(tmp_path).put(key, {"answer": "old"})
    refresh = ResponseCache(tmp_path, mode="refresh")
    assert refresh.get(key) is None
    refresh.put(key, {"answer": "new"})
    assert refresh.misses == 1
    assert ResponseCache(tmp_path).get(key) == {"answer": "new"}


def test_off_mode_neither_reads_nor_writes(tmp_path: Path) -> None:
    off = ResponseCache(tmp_path / "c", mode="off")
    key = off.key("p", "m", REQUEST, "v1")
    off.put(key, {"answer": 1})
    assert off.get(key) is None
    assert not (tmp_path / "c").exists()


def test_values_must_be_json(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        ResponseCache(tmp_path).put("k", {"bad": object()})


def test_two_threads_write_through_separate_connections(tmp_path: Path) -> None:
    def writer(name: str) -> None:
        cache = ResponseCache(tmp_path)  # own connection, like another process would have
        for i in range(150):
            cache.put(f"{name}-{i}", {"i": i})
        cache.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    reader = ResponseCache(tmp_path)
    assert all(reader.get(f"{n}-{i}") == {"i": i} for n in ("a", "b") for i in range(150))


def test_two_threads_share_one_instance(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)

    def worker(name: str) -> None:
        for i in range(150):
            cache.put(f"{name}-{i}", {"i": i})
            assert cache.get(f"{name}-{i}") == {"i": i}

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.hits == 300


def test_embedding_store_round_trips_float32(tmp_path: Path) -> None:
    store = EmbeddingStore(tmp_path)
    vectors = {"h1": np.array([0.1, -2.5, 3.0], dtype=np.float32), "h2": np.zeros(3, np.float32)}
    store.put_many("emb", vectors)
    got = EmbeddingStore(tmp_path).get_many("emb", ["h1", "h2", "h3"])
    assert set(got) == {"h1", "h2"}
    assert got["h1"].dtype == np.float32 and np.array_equal(got["h1"], vectors["h1"])
    assert store.get_many("other-embedder", ["h1"]) == {}
    assert EmbeddingStore(tmp_path, mode="off").get_many("emb", ["h1"]) == {}


def test_query_keys_depend_on_input_type_and_text() -> None:
    keys = {
        EmbeddingStore.query_key("query", "a"),
        EmbeddingStore.query_key("document", "a"),
        EmbeddingStore.query_key("query", "b"),
    }
    assert len(keys) == 3


class CountingEmbedder:
    """Wraps the local embedder and records every text it is asked to embed."""

    def __init__(self) -> None:
        self.inner = LocalMiniLMEmbedder()
        self.name = self.inner.name
        self.texts: list[str] = []

    async def embed(self, texts: Sequence[str], input_type: InputType) -> EmbedResult:
        self.texts.extend(texts)
        return await self.inner.embed(texts, input_type)


def entity(entity_id: str, content: str) -> Entity:
    return Entity(
        entity_id=entity_id,
        entity_type=EntityType.KNOWLEDGE,
        load_mode=LoadMode.SEMANTIC,
        title=entity_id.replace("_", " ").title(),
        summary=f"About {entity_id}",
        content=content,
    )


def prepare(store: EmbeddingStore, entities: list[Entity]) -> CountingEmbedder:
    embedder = CountingEmbedder()
    pipeline = SemanticPipeline("m", embedder, CosineReranker(), store, concurrency=1)
    asyncio.run(pipeline.prepare(entities))
    return embedder


def test_a_one_entity_edit_re_embeds_one_entity(tmp_path: Path) -> None:
    kb = [entity(name, f"{name} content") for name in ("gray_rock", "biff", "boundaries")]
    assert len(prepare(EmbeddingStore(tmp_path), kb).texts) == 3
    assert prepare(EmbeddingStore(tmp_path), kb).texts == []
    edited = [kb[0], entity("biff", "BIFF: brief, informative, friendly, firm"), kb[2]]
    again = prepare(EmbeddingStore(tmp_path), edited)
    assert again.texts == [edited[1].embedding_text()]
    assert len(prepare(EmbeddingStore(tmp_path, mode="refresh"), edited).texts) == 3


def _matrix(rows: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, 4)).astype(np.float32)


def _matrix_files(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "matrices").glob("*.bin"))


def test_an_entity_matrix_is_read_back_only_for_the_same_embedder_and_entities(tmp_path: Path) -> None:
    store, hashes, matrix = EmbeddingStore(tmp_path), ["h1", "h2", "h3"], _matrix(3)
    store.put_matrix("emb", hashes, matrix)
    got = EmbeddingStore(tmp_path).get_matrix("emb", hashes)
    assert got is not None and got.dtype == np.float32 and np.array_equal(got, matrix)
    assert store.get_matrix("other-embedder", hashes) is None
    assert store.get_matrix("emb", ["h2", "h1", "h3"]) is None  # rows are in this order only
    assert store.get_matrix("emb", ["h1", "h2"]) is None
    # refresh writes but never reads; off neither reads nor writes.
    assert EmbeddingStore(tmp_path, mode="refresh").get_matrix("emb", hashes) is None
    EmbeddingStore(tmp_path / "off", mode="off").put_matrix("emb", hashes, matrix)
    assert not (tmp_path / "off").exists()


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "no checksum", "empty", "row count"])
def test_a_damaged_matrix_file_is_never_trusted(tmp_path: Path, damage: str) -> None:
    store, hashes = EmbeddingStore(tmp_path), ["h1", "h2", "h3"]
    store.put_matrix("emb", hashes, _matrix(3))
    (file,) = _matrix_files(tmp_path)
    data = bytearray(file.read_bytes())
    if damage == "flipped byte":
        data[-1] ^= 0x01
    elif damage == "truncated":
        data = data[: len(data) - 7]
    elif damage == "no checksum":
        data = data[data.index(b"\n") + 1 :]
    elif damage == "empty":
        data = bytearray()
    file.write_bytes(bytes(data))
    if damage == "row count":  # a whole, checksummed file of the wrong shape
        store.put_matrix("emb", hashes, _matrix(2))
    assert store.get_matrix("emb", hashes) is None


def test_only_the_newest_matrices_of_an_embedder_are_kept(tmp_path: Path) -> None:
    store = EmbeddingStore(tmp_path)
    store.put_matrix("other", ["x"], _matrix(1))
    for n in range(6):
        store.put_matrix("emb", [f"h{n}"], _matrix(1, seed=n))
    assert len(_matrix_files(tmp_path)) == 4 + 1
    assert store.get_matrix("other", ["x"]) is not None
    assert store.get_matrix("emb", ["h5"]) is not None and store.get_matrix("emb", ["h0"]) is None


def test_an_index_from_the_stored_matrix_ranks_as_one_from_the_store(tmp_path: Path) -> None:
    kb = [entity(name, f"{name} content") for name in ("gray_rock", "biff", "boundaries")]
    prepare(EmbeddingStore(tmp_path), kb)  # embeds, stores the rows and the matrix

    async def ranked(store: EmbeddingStore) -> tuple[list[str], list[float], int]:
        embedder = CountingEmbedder()
        pipeline = SemanticPipeline("m", embedder, CosineReranker(), store, concurrency=1)
        await pipeline.prepare(kb)
        done = await pipeline.retrieve("t", "friendly and firm")
        return done.candidate_ids, [c.score for c in done.candidates], len(embedder.texts)

    from_matrix = asyncio.run(ranked(EmbeddingStore(tmp_path)))
    (file,) = _matrix_files(tmp_path)
    file.write_bytes(b"0" * 64 + b"\nnot an array")  # rows from the store again
    from_rows = asyncio.run(ranked(EmbeddingStore(tmp_path)))
    assert from_matrix[:2] == from_rows[:2]
    # The query once (the first time), never an entity again: the rows came from the store.
    assert (from_matrix[2], from_rows[2]) == (1, 0)
    hashes = sorted((e.entity_id, e.content_hash) for e in kb)
    rebuilt = EmbeddingStore(tmp_path).get_matrix(LocalMiniLMEmbedder().name, [h for _, h in hashes])
    assert rebuilt is not None and rebuilt.shape[0] == len(kb)
