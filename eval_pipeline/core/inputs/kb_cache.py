"""The validated KB, stored: a warm run reads one file instead of parsing and validating every
entity file again.

The stored KB is trusted only while every file the KB loads from is the same file it was: same
name, size, mtime_ns, ctime_ns, inode and device (what git and make trust, plus ctime, which no
user can set: restoring an edited file's mtime still moves its ctime), and while the code that
validated it is the same (`code_version`). Anything else, a file added, edited, deleted or
renamed, or a stored file that is unreadable, truncated or does not match its own checksum, is
ignored and the KB is loaded from its files again, never half-trusted.

A file changed within `RACY_NS` of when it was read could change again within the same tick of
the filesystem's clock and keep its size and times, so a KB holding one is not stored (git's
"racy" rule); the next run stores it. The limit: a change that keeps a file's size, mtime, ctime
and inode (a clock set back, a disk edited underneath the filesystem) goes unseen;
`--cache refresh` reloads from the files.

One file per KB path, under the cache folder (`<cache>/kb/`), written atomically, and only after
the whole input loaded without a problem, so bad input writes nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_pipeline.core.code_version import code_version
from eval_pipeline.core.fileio import atomic_write_bytes
from eval_pipeline.core.inputs.kb import Entity, EntityType, KnowledgeBase, LoadMode, Vocabulary
from eval_pipeline.core.inputs.loading import KB_ENTITIES_DIR, KB_MANIFEST, Problem, kb_entity_names, load_kb

FORMAT = 1
DIRECTORY = "kb"
RACY_NS = 2_000_000_000  # covers coarse filesystem clocks (ticks of ms) and FAT's 2 s mtimes

# File name (the manifest comes first, then the entity files), size, mtime_ns, ctime_ns, inode,
# device.
Stat = list[str | int]  # as JSON gives it back


def _stats(path: Path) -> list[Stat] | None:
    """Each source file's identity, or None when one cannot be stat-ed (the load reports it)."""
    if path.is_dir():
        root, entities = str(path), str(path / KB_ENTITIES_DIR)
        files = [(KB_MANIFEST, f"{root}/{KB_MANIFEST}")]
        files += [(name, f"{entities}/{name}") for name in kb_entity_names(path)]
    else:
        files = [(path.name, str(path))]
    out: list[Stat] = []
    for name, file in files:
        try:
            info = os.stat(file)
        except OSError:
            return None
        out.append([name, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev])
    return out


def _entity(fields: dict[str, Any], unset: list[str], content_hash: str) -> Entity:
    """An Entity from fields that were validated when stored (no validation again), with its
    stored content hash (no hashing again). Every field is given: pydantic inspects a default
    factory's signature each time it fills a default, which would cost more than the rest."""
    values = dict(fields)
    values["entity_type"] = EntityType(values["entity_type"])
    values["load_mode"] = LoadMode(values["load_mode"])
    entity = Entity.model_construct(_fields_set=set(values).difference(unset), **values)
    entity.__dict__["content_hash"] = content_hash  # the cached_property's slot
    return entity


def _stored_entity(entity: Entity) -> list[Any]:
    unset = sorted(set(Entity.model_fields).difference(entity.model_fields_set))
    return [entity.content_hash, unset, entity.model_dump(mode="json")]


def _payload(kb: KnowledgeBase) -> dict[str, Any] | None:
    """The KB as plain JSON data, or None when a value would not come back as it was (YAML can
    give a date where JSON gives a string): such a KB is loaded from its files every time."""
    entities = [_stored_entity(e) for e in kb.entities]
    for (content_hash, unset, fields), original in zip(entities, kb.entities, strict=True):
        again = _entity(json.loads(json.dumps(fields)), unset, content_hash)
        if again.model_dump() != original.model_dump():
            return None
    return {
        "kb_version": kb.kb_version,
        "name": kb.name,
        "vocabulary": kb.vocabulary.model_dump(mode="json"),
        "kb_hash": kb.content_hash,
        "entities": entities,
    }


def _knowledge_base(payload: dict[str, Any]) -> KnowledgeBase:
    kb = KnowledgeBase.model_construct(
        kb_version=payload["kb_version"],
        name=payload["name"],
        vocabulary=Vocabulary.model_construct(**payload["vocabulary"]),
        entities=[
            _entity(fields, unset, content_hash) for content_hash, unset, fields in payload["entities"]
        ],
    )
    kb.__dict__["content_hash"] = payload["kb_hash"]
    return kb


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
        try:
            data = self.file_for(kb_path).read_bytes()
            head, _, body = data.partition(b"\n")
            header = json.loads(head)
            expected = {**self._header(kb_path, stats), "sha256": hashlib.sha256(body).hexdigest()}
            if header != expected:
                return None
            return _knowledge_base(json.loads(body))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None  # absent, unreadable or not ours: load from the files

    def _racy(self, stats: list[Stat]) -> bool:
        """Whether a file changed so recently that it could change again unseen (see above)."""
        after = self.clock() - RACY_NS
        return any(max(int(s[2]), int(s[3])) >= after for s in stats)

    def load(self, kb_path: Path, problems: list[Problem]) -> tuple[KnowledgeBase | None, StoreLater | None]:
        """The KB (stored, or loaded from its files) and, when it should be stored, what to call
        once the whole input has loaded without a problem."""
        stats = _stats(kb_path)
        if stats is not None and self.read:
            stored = self._stored(kb_path, stats)
            if stored is not None:
                return stored, None
        before = len(problems)
        kb = load_kb(kb_path, problems)
        if not self.write or kb is None or len(problems) > before or stats is None or self._racy(stats):
            return kb, None
        return kb, StoreLater(self, kb_path, kb, stats)


@dataclass(frozen=True)
class StoreLater:
    cache: KbCache
    kb_path: Path
    kb: KnowledgeBase
    stats: list[Stat]

    def __call__(self) -> None:
        # The files may have changed while they were read: store only what is still current.
        if _stats(self.kb_path) != self.stats:
            return
        payload = _payload(self.kb)
        if payload is None:
            return
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        header = {**self.cache._header(self.kb_path, self.stats), "sha256": hashlib.sha256(body).hexdigest()}
        # A cache that cannot be written is a slower next run, not a failed one.
        with contextlib.suppress(OSError):
            atomic_write_bytes(self.cache.file_for(self.kb_path), json.dumps(header).encode() + b"\n" + body)
