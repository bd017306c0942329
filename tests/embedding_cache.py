"""The bundled embedder's vectors of the sample and the tenant-domain fixture, made once per
test session: tests of verdicts and gates copy them into a run's cache folder, as a user's cache
holds them after a first run, instead of embedding the same KB and prompts again in every test
(a cold sample evaluation spends most of its CPU there)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.conftest import REPO, TENANT

# A pytest plugin of every session (tests/conftest.py): what a test needs is imported only when a
# test asks for it, so collecting the quick tests imports no provider.

DOMAINS = ((REPO / "kb", REPO / "test_banks"), (TENANT / "kb.yaml", TENANT / "banks"))


@pytest.fixture(scope="session")
def local_embeddings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder that indexed both domains' KBs and embedded their
    semantic prompts through `local-minilm`, as `run` does (providers/factory.py)."""
    from filelock import FileLock

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        where = tmp_path_factory.mktemp("local-embeddings")
        _embed(where)
        return where
    # Made once for the session's workers, not once by each (~9 s of CPU, most of it the sample):
    # they share the folder above their own temporary folders, one session's alone.
    shared = tmp_path_factory.getbasetemp().parent
    where, made = shared / "local-embeddings", shared / "local-embeddings.made"
    with FileLock(shared / "local-embeddings.lock"):
        if not made.exists():
            # The store's connection may stay open until collected, and closing it rewrites the
            # file (a checkpoint) while another worker copies it: the shared folder holds a copy
            # made with SQLite's backup instead, which no connection holds.
            from eval_pipeline.providers.cache import EmbeddingStore

            work = tmp_path_factory.mktemp("local-embeddings-work")
            _embed(work)
            shutil.rmtree(where, ignore_errors=True)  # a worker that died half-way
            where.mkdir()
            name = EmbeddingStore.FILENAME
            with (
                closing(sqlite3.connect(work / name)) as store,
                closing(sqlite3.connect(where / name)) as copy,
            ):
                store.backup(copy)
            made.touch()
    return where


def _embed(where: Path) -> None:
    from eval_pipeline.core.inputs.validation import load_validated
    from eval_pipeline.providers.factory import run_semantic
    from eval_pipeline.providers.models import load_models
    from eval_pipeline.providers.target import retrieval_items

    cfg = load_models(REPO / "models.yaml")["local-minilm"]
    for kb_path, banks_path in DOMAINS:
        kb, banks = load_validated(kb_path, banks_path)
        run_semantic(cfg, kb.entities, retrieval_items(banks.semantic_tests, 1), {}, where)


def warm(cache_dir: Path, embeddings: Path) -> None:
    """`cache_dir` (a run's --cache-dir) holding the store of `embeddings` (its write-ahead log
    too, if SQLite kept one)."""
    from eval_pipeline.providers.cache import EmbeddingStore

    cache_dir.mkdir(parents=True, exist_ok=True)
    for part in embeddings.glob(f"{EmbeddingStore.FILENAME}*"):
        shutil.copy(part, cache_dir / part.name)
