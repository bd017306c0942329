"""The validated KB, stored: a warm run reads one file instead of parsing every entity file again.

It is trusted only while each file the KB loads from keeps its name, size, mtime_ns, ctime_ns,
inode and device (what git and make trust, plus ctime, which no user can set) and the validating
code is the same (`code_version`); anything else, or a stored file that is unreadable or fails its
checksum, means loading from the files again, never half-trusting. A KB holding a file changed
within `RACY_NS` of being read is not stored (git's "racy" rule: it could change again within one
clock tick keeping its size and times); the next run stores it. A change keeping size, times and
inode (a clock set back) goes unseen: `--cache refresh` reloads. One file per KB path under
`<cache>/kb/`, written atomically, and only after the whole input loaded without a problem.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from eval_pipeline.core.code_version import code_version
from eval_pipeline.core.fileio import atomic_write_bytes
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.loading import KB_ENTITIES_DIR, KB_MANIFEST, Problem, entity_folder, load_kb

FORMAT = 1
DIRECTORY = "kb"
RACY_NS = 2_000_000_000  # covers coarse filesystem clocks (ticks of ms) and FAT's 2 s mtimes

# Name, size, mtime_ns, ctime_ns, inode, device: a list, as JSON gives it back.
Stat = list[str | int]


def _stat(name: str, file: str | Path, dir_fd: int | None = None) -> Stat:
    info = os.stat(file, dir_fd=dir_fd)
    return [name, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]


def _stats(path: Path) -> list[Stat] | None:
    """Each source file's identity, or None when one cannot be stat-ed (the load reports it)."""
    try:
        if not path.is_dir():
            return [_stat(path.name, path)]
        out = [_stat(KB_MANIFEST, path / KB_MANIFEST)]
        names = entity_folder(path).names
        if names:
            # Relative to the open folder: thousands of stats without resolving the path again.
            folder = os.open(path / KB_ENTITIES_DIR, os.O_RDONLY | os.O_DIRECTORY)
            try:
                out += [_stat(name, name, folder) for name in names]
            finally:
                os.close(folder)
        return out
    except OSError:
        return None


class _Stored(BaseModel):
    """What is stored of a KB: the KB as its files gave it (fields a file left out stay unset),
    validated again when read (pydantic's JSON validation costs less than building the models
    unvalidated in Python), and the hashes computed when it was stored."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    kb: KnowledgeBase
    entity_hashes: list[str]
    kb_hash: str

    def knowledge_base(self) -> KnowledgeBase:
        if len(self.entity_hashes) != len(self.kb.entities):
            raise ValueError("one hash an entity")
        for entity, content_hash in zip(self.kb.entities, self.entity_hashes, strict=True):
            entity.__dict__["content_hash"] = content_hash  # the cached_property's slot
        self.kb.__dict__["content_hash"] = self.kb_hash
        return self.kb


def _body(kb: KnowledgeBase) -> bytes | None:
    """The stored form of `kb`, or None when a value would not come back as it was (YAML gives a
    date where JSON gives a string): such a KB is loaded from its files every time."""
    stored = _Stored(kb=kb, entity_hashes=[e.content_hash for e in kb.entities], kb_hash=kb.content_hash)
    body = stored.model_dump_json(exclude_unset=True).encode("utf-8")
    again = _Stored.model_validate_json(body).kb
    same = again.model_dump() == kb.model_dump() and all(
        a.model_fields_set == b.model_fields_set for a, b in zip(again.entities, kb.entities, strict=True)
    )
    return body if same else None


@dataclass(frozen=True)
class _Read:
    """A stored file as this process last read it: which file it was, its header, its KB."""

    file: Path
    identity: tuple[int, ...]  # inode, device, size, mtime_ns, ctime_ns
    header: dict[str, Any]  # without the checksum, which the file matched
    kb: KnowledgeBase


# The stored file this process read last: a process that loads the same KB again (a notebook, a
# test suite, a benchmark's warm runs) skips reading, hashing and validating it again. It answers
# only while the file is that very file (the store replaces a file, never edits it, so anything
# else gives it a new inode or ctime) and the header it held still matches this load's fresh stats
# of the KB files: the same checks as the file itself. The KB is frozen, so sharing it between
# loads shares nothing that can change.
_last_read: _Read | None = None


@dataclass
class KbCache:
    """Where stored KBs live, whether to read them (`refresh` only writes) and whether to write
    them (a dry run writes nothing)."""

    directory: Path
    read: bool = True
    write: bool = True
    clock: Callable[[], int] = time.time_ns  # for the racy rule; tests move it on

    def file_for(self, kb_path: Path) -> Path:
        name = hashlib.sha256(str(kb_path.resolve()).encode("utf-8")).hexdigest()[:32]
        return self.directory / DIRECTORY / f"{name}.json"

    def _header(self, kb_path: Path, stats: list[Stat]) -> dict[str, Any]:
        return {"format": FORMAT, "code": code_version(), "kb": str(kb_path.resolve()), "files": stats}

    def _stored(self, kb_path: Path, stats: list[Stat]) -> KnowledgeBase | None:
        """The stored KB if it is there, whole, and of exactly these files and this code."""
        global _last_read
        expected = self._header(kb_path, stats)
        try:
            file = self.file_for(kb_path)
            with file.open("rb") as opened:
                info = os.fstat(opened.fileno())
                identity = (info.st_ino, info.st_dev, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
                last = _last_read
                if last is not None and last.file == file and last.identity == identity:
                    return last.kb if last.header == expected else None
                data = opened.read()
            head, _, body = data.partition(b"\n")
            if json.loads(head) != {**expected, "sha256": hashlib.sha256(body).hexdigest()}:
                return None
            kb = _Stored.model_validate_json(body).knowledge_base()
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None  # absent, unreadable or not ours: load from the files
        _last_read = _Read(file, identity, expected, kb)
        return kb

    def load(self, kb_path: Path, problems: list[Problem]) -> Loaded:
        """The KB, stored or loaded from its files (then, when it should be stored, what to call
        once the whole input has loaded without a problem)."""
        stats = _stats(kb_path)
        if stats is not None and self.read:
            stored = self._stored(kb_path, stats)
            if stored is not None:
                return Loaded(stored, from_store=True)
        before = len(problems)
        kb = load_kb(kb_path, problems)
        if not self.write or kb is None or len(problems) > before or stats is None:
            return Loaded(kb)
        # A file changed so recently could change again unseen (the racy rule): the next run stores it.
        after = self.clock() - RACY_NS
        if any(max(int(s[2]), int(s[3])) >= after for s in stats):
            return Loaded(kb)
        return Loaded(kb, store=partial(self._store, kb_path, kb, stats))

    def _store(self, kb_path: Path, kb: KnowledgeBase, stats: list[Stat]) -> None:
        # The files may have changed while they were read: store only what is still current.
        if _stats(kb_path) != stats:
            return
        body = _body(kb)
        if body is None:
            return
        header = {**self._header(kb_path, stats), "sha256": hashlib.sha256(body).hexdigest()}
        # A cache that cannot be written is a slower next run, not a failed one.
        with contextlib.suppress(OSError):
            atomic_write_bytes(self.file_for(kb_path), json.dumps(header).encode() + b"\n" + body)


class Loaded(NamedTuple):
    kb: KnowledgeBase | None
    # Read from the store: the KB passed its own checks (`cross_check`'s KB part) when stored.
    from_store: bool = False
    store: Callable[[], None] | None = None
