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
from typing import Any, Literal

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
_CHECKSUM_LINE_MAX = 64  # "crc32:" and 8 hex digits, with room
_NPY_HEADER_MAX = 4096  # np.save writes a 2-D array's header in 128 bytes

_RESPONSES_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created_at REAL NOT NULL
)"""

_EMBEDDINGS_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    embedder TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (embedder, content_hash)
)"""


class _SqliteFile:
    """A lazily opened connection, reopened after a fork (connections must not cross one)."""

    def __init__(self, path: Path, schema: str) -> None:
        self.path = path
        self._schema = schema
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = 0

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        # Switching to WAL needs the file to itself, and SQLite does not always wait for it (the
        # busy timeout is skipped there): two processes opening a new cache at once can see
        # "database is locked". Retry until the busy timeout would have run out.
        deadline = time.monotonic() + _BUSY_TIMEOUT_S
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # durable enough for a cache, much faster
                conn.execute(self._schema)
                return conn
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    conn.close()
                    raise
                time.sleep(0.02)

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None or self._pid != os.getpid():
                self._conn, self._pid = self._open(), os.getpid()
            yield self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


class _Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def count(self, hits: int, misses: int) -> None:
        with self._lock:
            self.hits += hits
            self.misses += misses


class ResponseCache:
    """Successful provider responses keyed by what determined them. Errors are never stored."""

    FILENAME = "responses.sqlite3"

    def __init__(self, cache_dir: Path, mode: CacheMode = "use") -> None:
        self.mode: CacheMode = mode
        self._db = _SqliteFile(cache_dir / self.FILENAME, _RESPONSES_SCHEMA)
        self._counters = _Counters()
        self.directory = cache_dir

    @staticmethod
    def key(
        provider: str,
        model: str,
        request: Mapping[str, Any],
        prompt_version: str,
        trial: int = 0,
    ) -> str:
        """Content address: any change to the request, prompt version or trial is a new key."""
        return sha256_text(
            canonical_json(
                {
                    "provider": provider,
                    "model": model,
                    "request": dict(request),
                    "prompt_version": prompt_version,
                    "trial": trial,
                }
            )
        )

    @property
    def hits(self) -> int:
        return self._counters.hits

    @property
    def misses(self) -> int:
        return self._counters.misses

    def get(self, key: str) -> dict[str, Any] | None:
        row = None
        if self.mode == "use":
            with self._db.connection() as conn:
                row = conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        self._counters.count(hits=int(row is not None), misses=int(row is None))
        if row is None:
            return None
        value: dict[str, Any] = json.loads(row[0])
        return value

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        if self.mode == "off":
            return
        text = canonical_json(dict(value))  # fails fast on values that are not JSON
        with self._db.connection() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO responses (key, value, created_at) VALUES (?, ?, ?)",
                (key, text, time.time()),
            )

    def close(self) -> None:
        self._db.close()


def _checksum(body: bytes | memoryview) -> bytes:
    """A matrix file's check against damage (a cache, not a signature): CRC-32 is much cheaper than
    SHA-256 on a warm run's largest read."""
    return f"crc32:{zlib.crc32(body):08x}".encode("ascii")


def _read_matrix(path: Path) -> Vectors | None:
    """The array of a matrix file, or None when it does not match its checksum. The file is read
    once into a buffer the array then uses as it is: no copy of the 7.7 MB of a 5,000-entity matrix
    (splitting off the checksum line and `np.load` from a stream each made one)."""
    with path.open("rb") as file:
        data = bytearray(os.fstat(file.fileno()).st_size)
        if file.readinto(data) != len(data):
            return None  # the file shrank while it was read
    cut = data.find(b"\n", 0, _CHECKSUM_LINE_MAX)
    if cut < 0:
        return None
    body = memoryview(data)[cut + 1 :]
    if data[:cut] != _checksum(body):
        return None
    header = io.BytesIO(body[:_NPY_HEADER_MAX])
    if np.lib.format.read_magic(header) != (1, 0):  # what `put_matrix`'s np.save writes
        return None
    shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(header)
    if dtype.hasobject:  # as np.load without allow_pickle: never an object array
        return None
    count = int(np.prod(shape, dtype=np.int64))
    array = np.frombuffer(data, dtype=dtype, count=count, offset=cut + 1 + header.tell())
    return array.reshape(shape, order="F" if fortran_order else "C")


class EmbeddingStore:
    """Vectors per (embedder name, content hash), so a one-entity KB edit re-embeds one entity.

    Entity vectors are keyed by `Entity.content_hash`; query vectors by `query_key(...)`.
    """

    FILENAME = "embeddings.sqlite3"

    def __init__(self, cache_dir: Path, mode: CacheMode = "use") -> None:
        self.mode: CacheMode = mode
        self._db = _SqliteFile(cache_dir / self.FILENAME, _EMBEDDINGS_SCHEMA)
        self._counters = _Counters()

    @staticmethod
    def query_key(input_type: InputType, text: str) -> str:
        return sha256_text(canonical_json({"input_type": input_type, "text": text}))

    @property
    def hits(self) -> int:
        return self._counters.hits

    @property
    def misses(self) -> int:
        return self._counters.misses

    def get_many(self, embedder: str, hashes: Sequence[str]) -> dict[str, Vector]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, Vector] = {}
        if self.mode == "use":
            with self._db.connection() as conn:
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
        self._counters.count(hits=len(found), misses=len(wanted) - len(found))
        return found

    def put_many(self, embedder: str, vectors: Mapping[str, Vector]) -> None:
        if self.mode == "off" or not vectors:
            return
        rows = [(embedder, h, np.ascontiguousarray(v, dtype="<f4").tobytes()) for h, v in vectors.items()]
        with self._db.connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT OR REPLACE INTO embeddings (embedder, content_hash, vector) VALUES (?, ?, ?)",
                    rows,
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def get_matrix(self, embedder: str, hashes: Sequence[str]) -> Vectors | None:
        """The vectors of `hashes`, row by row, from the one file a run stored for exactly these
        hashes (`put_matrix`), or None. The file is checked against its own checksum, so a
        corrupt one is never trusted (the rows then come from the store)."""
        if self.mode != "use":
            return None
        try:
            matrix = _read_matrix(self._matrix_file(embedder, hashes))
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        if matrix is None or matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape[0] != len(hashes):
            return None
        self._counters.count(hits=len(hashes), misses=0)
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
        return self._db.path.parent / _MATRICES_DIR / f"{sha256_text(embedder)[:16]}-{key}.bin"

    def close(self) -> None:
        self._db.close()
