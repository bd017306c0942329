"""Where outputs go: a local directory or a base URI on an object store (`file://`, `s3://`,
`gs://`: any fsspec protocol whose package is installed; s3fs is).

Locally a write replaces the file at once (temp file and rename); on an object store one PUT is
atomic. Credentials and endpoints come from the store's own environment (for S3:
AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL), never from this project.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from eval_pipeline.core.fileio import atomic_write_bytes

if TYPE_CHECKING:
    from upath import UPath

LOCAL_PROTOCOLS = frozenset({"", "file", "local"})


def output_path(base: str | Path | UPath) -> UPath:
    """A plain path or a URI as a path object that can reach it."""
    from upath import UPath

    return base if isinstance(base, UPath) else UPath(str(base))


def output_location(base: str | Path) -> Path | UPath:
    """Like `output_path`, but a plain local path stays a `Path`: a run with nothing on an object
    store does not pay for importing universal_pathlib and fsspec (slow)."""
    return Path(base) if "://" not in str(base) else output_path(base)


def is_local(path: Path | UPath) -> bool:
    return getattr(path, "protocol", "") in LOCAL_PROTOCOLS


def local_path(path: Path | UPath) -> Path:
    """The file system path of a local `path` (`file:///x` and plain `x` alike)."""
    if not getattr(path, "protocol", ""):
        return Path(str(path))
    return Path(cast("UPath", path).path)


def write_bytes(path: Path | UPath, data: bytes) -> None:
    if is_local(path):
        atomic_write_bytes(local_path(path), data)
    else:
        path.write_bytes(data)


def write_text(path: Path | UPath, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))
