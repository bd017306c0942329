"""Where outputs go: a local directory or a base URI on an object store (`file://`, `s3://`,
`gs://`: any fsspec protocol whose package is installed; s3fs is).

Locally a write replaces the file at once (temp file and rename), as it always did. An object
store has no rename, but one PUT is atomic: a reader sees the old object or the new, never a part.
Credentials and endpoints come from the store's own environment (for S3: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL for an S3-compatible server), never from this project.
"""

from __future__ import annotations

from pathlib import Path

from upath import UPath

from eval_pipeline.core.fileio import atomic_write_bytes

LOCAL_PROTOCOLS = frozenset({"", "file", "local"})


def output_path(base: str | Path | UPath) -> UPath:
    """A plain path or a URI as a path object that can reach it."""
    return base if isinstance(base, UPath) else UPath(str(base))


def is_local(path: UPath) -> bool:
    return path.protocol in LOCAL_PROTOCOLS


def local_path(path: UPath) -> Path:
    """The file system path of a local `path` (`file:///x` and plain `x` alike)."""
    return Path(path.path) if path.protocol else Path(str(path))


def write_bytes(path: UPath, data: bytes) -> None:
    if is_local(path):
        atomic_write_bytes(local_path(path), data)
    else:
        path.write_bytes(data)


def write_text(path: UPath, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))
