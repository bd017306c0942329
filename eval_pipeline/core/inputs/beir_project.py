"""A BEIR folder as a project of this tool, written all at once or not at all: a KB directory (one
KNOWLEDGE entity a passage), a semantic bank (one test a judged query, its graded judgments as
`relevant` gains) and a models file.

The corpus is streamed (each passage checked and written as read; only its id mapping is kept, for
the qrels); judgments and judged queries are small and kept. Everything is written into temporary
folders beside the targets and renamed into place at the end: a failed import leaves nothing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from eval_pipeline.core.fileio import MAX_INPUT_BYTES
from eval_pipeline.core.inputs.banks import BankLayout, SemanticTest
from eval_pipeline.core.inputs.beir import (
    CORPUS_FILE,
    QUERIES_FILE,
    BeirError,
    Record,
    qrels_path,
    read_corpus,
    read_qrels,
    read_queries,
)
from eval_pipeline.core.inputs.external_ids import mapped_entity_id, mapped_test_id
from eval_pipeline.core.inputs.kb import Entity, EntityType, LoadMode
from eval_pipeline.core.inputs.loading import KB_ENTITIES_DIR, KB_MANIFEST
from eval_pipeline.core.system_limits import writing_to

# Shown to rerankers with every candidate: the first sentence, not the passage.
SUMMARY_CHARS = 200
TITLE_CHARS = 120
CATEGORY = "imported"

M = TypeVar("M", bound=BaseModel)
# libyaml's emitter: a 100k-passage corpus is 100k files.
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass
class ImportCounts:
    documents: int = 0
    mapped_documents: int = 0  # ids that did not fit the KB's rules and were mapped
    tests: int = 0
    mapped_queries: int = 0
    judgments: int = 0
    zero_gain_judgments: int = 0
    unjudged_queries: int = 0  # skipped: no qrels row names them
    unrelevant_queries: int = 0  # skipped: every judgment has gain 0
    leftovers_removed: int = 0  # staging folders of a killed earlier import, removed first


@dataclass(frozen=True)
class ImportTargets:
    kb_dir: Path
    banks_dir: Path
    models_file: Path

    def refuse_existing(self) -> None:
        for folder in (self.kb_dir, self.banks_dir):
            if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
                raise BeirError(folder, "exists and is not an empty folder; import writes new ones")
        if self.models_file.exists():
            message = "exists; import writes a new project: give --kb a folder inside a new one (NEW/kb)"
            raise BeirError(self.models_file, message)
        kb, banks = self.kb_dir.resolve(), self.banks_dir.resolve()
        if kb == banks or kb in banks.parents or banks in kb.parents:
            raise BeirError(self.banks_dir, "the KB and banks folders must be apart")


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def first_sentence(text: str, limit: int) -> str:
    """The first line's first sentence, at most `limit` characters."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return _bounded(re.split(r"(?<=[.!?])\s+", line, maxsplit=1)[0], limit)


def _checked(model: type[M], data: dict[str, Any], file: Path, line: int, item: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "-"
        raise BeirError(file, err["msg"], line, item, field) from None


def _entity(doc: Record, entity_id: str, src: Path) -> Entity:
    title, text = doc.title.strip(), doc.text.strip()
    if not title and not text:
        raise BeirError(src / CORPUS_FILE, "title and text are both blank", doc.line, doc.source_id, "text")
    data = {
        "entity_id": entity_id,
        "entity_type": EntityType.KNOWLEDGE.value,
        "load_mode": LoadMode.SEMANTIC.value,
        "title": _bounded(title, TITLE_CHARS) if title else first_sentence(text, TITLE_CHARS),
        "summary": first_sentence(text or title, SUMMARY_CHARS),
        "content": doc.text if text else doc.title,
        "source_id": doc.source_id,
    }
    return _checked(Entity, data, src / CORPUS_FILE, doc.line, doc.source_id)


def _own_id(to_ours: Callable[[str], str], original: str, taken: set[str], file: Path, line: int) -> str:
    """Our id for `original`, refused when another original maps to it too (only if two slugs and
    48-bit hashes coincide)."""
    ours = to_ours(original)
    if ours in taken:
        raise BeirError(file, f"maps to '{ours}' as another id does", line, original, "_id")
    taken.add(ours)
    return ours


def _write_entities(src: Path, entities_dir: Path, counts: ImportCounts) -> dict[str, str]:
    """Write each passage as it is read; return original id -> entity id."""
    entities_dir.mkdir(parents=True)
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for doc in read_corpus(src):
        if doc.source_id in ids:
            raise BeirError(src / CORPUS_FILE, "duplicate document id", doc.line, doc.source_id, "_id")
        entity_id = _own_id(mapped_entity_id, doc.source_id, taken, src / CORPUS_FILE, doc.line)
        entity = _entity(doc, entity_id, src)
        data = entity.model_dump(mode="json", exclude_defaults=True)
        text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
        (entities_dir / f"{entity_id}.yaml").write_text(text, encoding="utf-8")
        ids[doc.source_id] = entity_id
        counts.documents += 1
        counts.mapped_documents += entity_id != doc.source_id
    if not ids:
        raise BeirError(src / CORPUS_FILE, "no documents")
    return ids


@dataclass
class _Judged:
    first_line: int
    gains: dict[str, int]  # entity id -> gain


def _judgments(src: Path, split: str, doc_ids: dict[str, str], counts: ImportCounts) -> dict[str, _Judged]:
    path = qrels_path(src, split)
    judged: dict[str, _Judged] = {}
    for j in read_qrels(src, split):
        entity_id = doc_ids.get(j.doc_id)
        if entity_id is None:
            message = f"unknown document '{j.doc_id}' (not in {CORPUS_FILE})"
            raise BeirError(path, message, j.line, j.query_id, "corpus-id")
        entry = judged.setdefault(j.query_id, _Judged(j.line, {}))
        earlier = entry.gains.get(entity_id)
        if earlier is not None and earlier != j.gain:
            message = f"'{j.doc_id}' judged again: {earlier}, then {j.gain}"
            raise BeirError(path, message, j.line, j.query_id, "score")
        if earlier is None:
            counts.judgments += 1
            counts.zero_gain_judgments += j.gain == 0
        entry.gains[entity_id] = j.gain
    return judged


def _tests(src: Path, split: str, judged: dict[str, _Judged], counts: ImportCounts) -> list[dict[str, Any]]:
    """The bank's tests, checked, in the queries' order."""
    tests: list[dict[str, Any]] = []
    seen: set[str] = set()
    taken: set[str] = set()
    for query in read_queries(src):
        if query.source_id in seen:
            raise BeirError(src / QUERIES_FILE, "duplicate query id", query.line, query.source_id, "_id")
        seen.add(query.source_id)
        entry = judged.get(query.source_id)
        if entry is None:
            counts.unjudged_queries += 1
            continue
        if not any(entry.gains.values()):
            counts.unrelevant_queries += 1
            continue
        test_id = _own_id(mapped_test_id, query.source_id, taken, src / QUERIES_FILE, query.line)
        counts.mapped_queries += test_id != query.source_id
        data = {
            "test_id": test_id,
            "source_id": query.source_id,
            "category": CATEGORY,
            "prompt": query.text,
            "relevant": entry.gains,
        }
        _checked(SemanticTest, data, src / QUERIES_FILE, query.line, query.source_id)
        tests.append(data)
    qrels = qrels_path(src, split)
    unknown = min(((e.first_line, q) for q, e in judged.items() if q not in seen), default=None)
    if unknown is not None:
        raise BeirError(qrels, f"unknown query (not in {QUERIES_FILE})", *unknown, "query-id")
    if not tests:
        raise BeirError(qrels, "no query has a judgment with gain > 0: nothing to evaluate")
    counts.tests = len(tests)
    return tests


def _bank_text(tests: list[dict[str, Any]], description: str, qrels: Path) -> str:
    bank = {"bank_type": "SEMANTIC", "version": "1.0", "description": description, "tests": tests}
    text = json.dumps(bank, indent=1, ensure_ascii=False) + "\n"
    size = len(text.encode("utf-8"))
    if size > MAX_INPUT_BYTES:
        message = f"the bank would be {size:,} bytes, over the {MAX_INPUT_BYTES:,}-byte input limit"
        raise BeirError(qrels, message)
    return text


def _staging_prefix(target: Path) -> str:
    return f".{target.name}.importing-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep_leftovers(targets: ImportTargets) -> list[Path]:
    """Remove the staging folders an earlier import left beside the targets when it was killed
    (its process is gone: an import still running keeps its own); the folders removed."""
    removed: list[Path] = []
    for target in astuple(targets):
        prefix = _staging_prefix(target)
        try:
            entries = list(target.parent.iterdir())
        except OSError:  # no such folder yet: nothing left there
            continue
        for entry in entries:
            if not entry.name.startswith(prefix) or entry.is_symlink() or not entry.is_dir():
                continue
            pid = entry.name[len(prefix) :].split("-", 1)[0]
            if pid.isdigit() and _alive(int(pid)):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


@contextmanager
def _staged(targets: ImportTargets) -> Iterator[ImportTargets]:
    """Temporary twins of the targets beside them, renamed into place if the body succeeds. Their
    names carry this process's id, so that a later import can tell a killed one's leftovers."""
    made: list[Path] = []
    try:
        for target in astuple(targets):
            target.parent.mkdir(parents=True, exist_ok=True)
            prefix = f"{_staging_prefix(target)}{os.getpid()}-"
            made.append(Path(tempfile.mkdtemp(dir=target.parent, prefix=prefix)))
        staged = ImportTargets(made[0], made[1], made[2] / targets.models_file.name)
        yield staged
        _publish(list(zip(astuple(staged), astuple(targets), strict=True)))
    finally:
        for tmp in made:
            shutil.rmtree(tmp, ignore_errors=True)


def _publish(moves: list[tuple[Path, Path]]) -> None:
    """Rename each staged output into place; if one fails, take back those already placed."""
    placed: list[Path] = []
    try:
        for staged, target in moves:
            if target.is_dir():
                target.rmdir()  # checked empty before the import began
            os.rename(staged, target)
            placed.append(target)
    except BaseException:
        for target in placed:
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        raise


def import_beir(src: Path, split: str, name: str, targets: ImportTargets, models_text: str) -> ImportCounts:
    """Write the project; raise BeirError (nothing written) on bad input."""
    if not src.is_dir():
        raise BeirError(src, "BEIR folder not found")
    removed = sweep_leftovers(targets)
    targets.refuse_existing()
    counts = ImportCounts(leftovers_removed=len(removed))
    with writing_to(targets.kb_dir.parent), _staged(targets) as staged:
        doc_ids = _write_entities(src, staged.kb_dir / KB_ENTITIES_DIR, counts)
        judged = _judgments(src, split, doc_ids, counts)
        del doc_ids  # the largest thing held; the queries need only the judgments
        tests = _tests(src, split, judged, counts)
        description = f"Imported from the BEIR folder {src.name}, split {split}."
        manifest = {"kb_version": "1", "name": name, "description": description}
        manifest_text = yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True)
        (staged.kb_dir / KB_MANIFEST).write_text(manifest_text)
        layout = BankLayout()
        bank = staged.banks_dir / layout.semantic
        bank.parent.mkdir(parents=True)
        bank.write_text(_bank_text(tests, description, qrels_path(src, split)), encoding="utf-8")
        (staged.banks_dir / layout.history).mkdir(parents=True, exist_ok=True)
        staged.models_file.write_text(models_text, encoding="utf-8")
    return counts
