"""On-disk caches: provider responses (content-addressed) and embedding vectors.

Both live in SQLite files under one cache directory, in WAL mode so several processes (Dagster
steps) can read and write at once; within a process one connection is shared behind a lock.
Modes: `use` reads and writes; `refresh` never reads but writes (re-calls everything and keeps
the fresh answers); `off` neither reads nor writes and creates no file.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from eval_pipeline.core.fileio import atomic_write_bytes
from eval_pipeline.core.inputs.kb import canonical_json, sha256_text
from eval_pipeline.providers.base import InputType, Vectors

CacheMode = Literal["use", "refresh", "off"]
Vector = npt.NDArray[np.float32]

_BUSY_TIMEOUT_S = 30.0
_MAX_PARAMS = 500  # stay far below SQLite's bound-parameter limit in IN (...) lookups
_MATRICES_DIR = "matrices"
# Entity matrices kept per embedder: a few KB versions back (a run on the one before an edit, two
# KBs in turn) without growing with every edit.
_MATRICES_KEPT = 4


class _SqliteCache:
    """One cache file with its mode, and how many look-ups it answered. Its connection is opened
    on first use, and again after a fork (connections must not cross one)."""

    FILENAME: ClassVar[str]
    SCHEMA: ClassVar[str]

    def __init__(self, cache_dir: Path, mode: CacheMode = "use") -> None:
        self.mode: CacheMode = mode
        self.directory = cache_dir
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self.hits = 0
        self.misses = 0

    def _open(self) -> sqlite3.Connection:
        self.directory.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.directory / self.FILENAME,
            timeout=_BUSY_TIMEOUT_S,
            isolation_level=None,
            check_same_thread=False,
        )
        # Switching to WAL needs the file to itself, and SQLite does not always wait for it (the
        # busy timeout is skipped there): two processes opening a new cache at once can see
        # "database is locked". Retry until the busy timeout would have run out.
        deadline = time.monotonic() + _BUSY_TIMEOUT_S
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # durable enough for a cache, much faster
                conn.execute(self.SCHEMA)
                return conn
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    conn.close()
                    raise
                time.sleep(0.02)

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None or self._pid != os.getpid():
                self._conn, self._pid = self._open(), os.getpid()
            yield self._conn

    def _count(self, hits: int, misses: int) -> None:
        with self._lock:
            self.hits += hits
            self.misses += misses

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


class ResponseCache(_SqliteCache):
    """Successful provider responses keyed by what determined them. Errors are never stored."""

    FILENAME = "responses.sqlite3"
    SCHEMA = """CREATE TABLE IF NOT EXISTS responses (
        key TEXT PRIMARY KEY, value TEXT NOT NULL, created_at REAL NOT NULL
    )"""

    @staticmethod
    def key(
        provider: str,
        model: str,
        request: Mapping[str, Any],
        prompt_version: str,
        trial: int = 0,
    ) -> str:
        """Content address: any change to the request, prompt version or trial is a new key."""
        asked = {"provider": provider, "model": model, "request": dict(request), "trial": trial}
        return sha256_text(canonical_json({**asked, "prompt_version": prompt_version}))

    def get(self, key: str) -> dict[str, Any] | None:
        row = None
        if self.mode == "use":
            with self._connection() as conn:
                row = conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        self._count(hits=int(row is not None), misses=int(row is None))
        if row is None:
            return None
        value: dict[str, Any] = json.loads(row[0])
        return value

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        if self.mode == "off":
            return
        text = canonical_json(dict(value))  # fails fast on values that are not JSON
        with self._connection() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO responses (key, value, created_at) VALUES (?, ?, ?)",
                (key, text, time.time()),
            )


def _checksum(body: bytes) -> bytes:
    """A matrix file's check against damage (a cache, not a signature, so CRC-32 will do)."""
    return f"crc32:{zlib.crc32(body):08x}".encode("ascii")


class EmbeddingStore(_SqliteCache):
    """Vectors per (embedder name, content hash), so a one-entity KB edit re-embeds one entity;
    entity vectors are keyed by `Entity.content_hash`, query vectors by `query_key(...)`."""

    FILENAME = "embeddings.sqlite3"
    SCHEMA = """CREATE TABLE IF NOT EXISTS embeddings (
        embedder TEXT NOT NULL, content_hash TEXT NOT NULL, vector BLOB NOT NULL,
        PRIMARY KEY (embedder, content_hash)
    )"""

    @staticmethod
    def query_key(input_type: InputType, text: str) -> str:
        return sha256_text(canonical_json({"input_type": input_type, "text": text}))

    def get_many(self, embedder: str, hashes: Sequence[str]) -> dict[str, Vector]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, Vector] = {}
        if self.mode == "use":
            with self._connection() as conn:
                for start in range(0, len(wanted), _MAX_PARAMS):
                    chunk = wanted[start : start + _MAX_PARAMS]
                    marks = ",".join("?" * len(chunk))
                    rows = conn.execute(
                        "SELECT content_hash, vector FROM embeddings"
                        f" WHERE embedder = ? AND content_hash IN ({marks})",
                        (embedder, *chunk),
                    )
                    for content_hash, blob in rows:
                        found[content_hash] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        self._count(hits=len(found), misses=len(wanted) - len(found))
        return found

    def put_many(self, embedder: str, vectors: Mapping[str, Vector]) -> None:
        if self.mode == "off" or not vectors:
            return
        rows = [(embedder, h, np.ascontiguousarray(v, dtype="<f4").tobytes()) for h, v in vectors.items()]
        with self._connection() as conn, conn:  # one transaction: committed, or rolled back
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT OR REPLACE INTO embeddings (embedder, content_hash, vector) VALUES (?, ?, ?)", rows
            )

    def get_matrix(self, embedder: str, hashes: Sequence[str]) -> Vectors | None:
        """The vectors of `hashes`, row by row, from the one file a run stored for exactly these
        hashes (`put_matrix`), or None. The file is checked against its own checksum, so a
        corrupt one is never trusted (the rows then come from the store)."""
        if self.mode != "use":
            return None
        try:
            head, _, body = self._matrix_file(embedder, hashes).read_bytes().partition(b"\n")
            if head != _checksum(body):
                return None
            matrix: Vectors = np.load(io.BytesIO(body), allow_pickle=False)
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        if matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape[0] != len(hashes):
            return None
        self._count(hits=len(hashes), misses=0)
        return matrix

    def put_matrix(self, embedder: str, hashes: Sequence[str], matrix: Vectors) -> None:
        """Store `matrix` (one row per hash) as one file, so the next run with the same entities
        reads one array instead of a row each; only the newest few per embedder are kept."""
        if self.mode == "off":
            return
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(matrix, dtype=np.float32), allow_pickle=False)
        body = buffer.getvalue()
        target = self._matrix_file(embedder, hashes)
        try:
            atomic_write_bytes(target, _checksum(body) + b"\n" + body)
            kept = sorted(
                target.parent.glob(f"{target.name.split('-')[0]}-*.bin"),
                key=lambda f: f.stat().st_mtime_ns,
                reverse=True,
            )
            for old in kept[_MATRICES_KEPT:]:
                old.unlink(missing_ok=True)
        except OSError:
            pass  # the rows stay in the store: the next run reads them from there

    def _matrix_file(self, embedder: str, hashes: Sequence[str]) -> Path:
        key = sha256_text("\n".join(hashes))
        return self.directory / _MATRICES_DIR / f"{sha256_text(embedder)[:16]}-{key}.bin"
