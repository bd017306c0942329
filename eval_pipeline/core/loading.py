"""Read the KB and the banks directory from disk, collecting every problem instead of stopping.

A problem names the file (with the line for syntax errors), the test or entity id, and the
field. Callers print them one per line and exit 2; nothing here raises for a user mistake.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_pipeline.core.banks import (
    AlwaysBank,
    AlwaysTest,
    AnyTest,
    Mechanism,
    PatternBank,
    PatternRules,
    PatternTest,
    SemanticBank,
    SemanticTest,
    StateBank,
    StateTest,
)
from eval_pipeline.core.expectations import LoadedHistory
from eval_pipeline.core.history import HISTORY_GLOB, HistoryFile
from eval_pipeline.core.kb import Entity, KnowledgeBase, sha256_text

BANK_FILES: dict[Mechanism, str] = {
    Mechanism.SEMANTIC: "semantic/parent_test_bank.json",
    Mechanism.STATE: "state/state_handler_tests.json",
    Mechanism.PATTERN: "pattern/pattern_tests.json",
    Mechanism.ALWAYS: "always/always_load_tests.json",
}
RULES_FILE = "pattern/pattern_rules.json"
HISTORY_DIR = "semantic/history"
KB_MANIFEST = "manifest.yaml"
KB_ENTITIES_DIR = "entities"

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, order=True)
class Problem:
    file: str
    item: str  # test id, entity id, or "-" for the whole file
    field: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.item}: {self.field}: {self.message}"


class InputError(Exception):
    """Bad user input; carries every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = sorted(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class Banks(BaseModel):
    """Everything under `--banks-dir`. A bank whose file is absent is simply not run."""

    model_config = ConfigDict(extra="forbid")

    root: Path
    semantic: SemanticBank | None = None
    state: StateBank | None = None
    pattern: PatternBank | None = None
    always: AlwaysBank | None = None
    rules: PatternRules | None = None
    history: list[LoadedHistory] = Field(default_factory=list)
    file_hashes: dict[str, str] = Field(default_factory=dict)

    # A bank whose file is absent has no tests.
    @property
    def semantic_tests(self) -> list[SemanticTest]:
        return self.semantic.tests if self.semantic else []

    @property
    def state_tests(self) -> list[StateTest]:
        return self.state.tests if self.state else []

    @property
    def pattern_tests(self) -> list[PatternTest]:
        return self.pattern.tests if self.pattern else []

    @property
    def always_tests(self) -> list[AlwaysTest]:
        return self.always.tests if self.always else []

    def test_ids(self) -> set[str]:
        tests: list[AnyTest] = [
            *self.semantic_tests,
            *self.state_tests,
            *self.pattern_tests,
            *self.always_tests,
        ]
        return {t.test_id for t in tests}

    def counts(self) -> dict[Mechanism, int]:
        banks: dict[Mechanism, BaseModel | None] = {
            Mechanism.SEMANTIC: self.semantic,
            Mechanism.STATE: self.state,
            Mechanism.PATTERN: self.pattern,
            Mechanism.ALWAYS: self.always,
        }
        return {m: len(getattr(b, "tests", [])) for m, b in banks.items() if b is not None}


def read_structured(path: Path, shown: str, problems: list[Problem]) -> Any:
    """Parse JSON or YAML by extension; on failure record a problem (with line), return None."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        problems.append(Problem(shown, "-", "-", f"cannot read file: {exc.strerror}"))
        return None
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            problems.append(Problem(shown, "-", "-", f"invalid JSON: {exc.msg}", exc.lineno))
            return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        problems.append(Problem(shown, "-", "-", f"invalid YAML: {reason}", line))
        return None


def _item_for(data: Any, loc: tuple[int | str, ...], id_key: str) -> tuple[str, str]:
    """Map a pydantic error location to (test/entity id, field path inside that item)."""
    if len(loc) >= 2 and loc[0] in ("tests", "entities", "changes") and isinstance(loc[1], int):
        items = data.get(loc[0]) if isinstance(data, dict) else None
        item = items[loc[1]] if isinstance(items, list) and loc[1] < len(items) else None
        key = item.get(id_key) if isinstance(item, dict) else None
        name = str(key) if key else f"{loc[0]}[{loc[1]}]"
        rest = ".".join(str(p) for p in loc[2:]) or "-"
        return name, rest
    if isinstance(data, dict) and id_key in data and data[id_key]:
        return str(data[id_key]), ".".join(str(p) for p in loc) or "-"
    return "-", ".".join(str(p) for p in loc) or "-"


def parse_model(
    model: type[M], data: Any, shown: str, problems: list[Problem], id_key: str = "test_id"
) -> M | None:
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            # pydantic marks dict-key errors with a "[key]" step; the key itself is enough.
            loc = tuple(part for part in err["loc"] if part != "[key]")
            item, fld = _item_for(data, loc, id_key)
            problems.append(Problem(shown, item, fld, err["msg"]))
        return None


def parse_collection(
    model: type[M],
    data: Any,
    shown: str,
    problems: list[Problem],
    items_key: str = "tests",
    id_key: str = "test_id",
) -> M | None:
    """Validate item by item so one bad test doesn't hide the problems of the others.

    The result holds only the valid items; every invalid one has been reported.
    """
    if not isinstance(data, dict) or not isinstance(data.get(items_key), list):
        return parse_model(model, data, shown, problems, id_key)
    item_model = model.model_fields[items_key].annotation
    items = data[items_key]
    header = parse_model(model, {**data, items_key: []}, shown, problems, id_key)
    valid: list[Any] = []
    for i, item in enumerate(items):
        before = len(problems)
        parsed = parse_model(_list_item_type(item_model), item, shown, problems, id_key)
        if parsed is None:
            # Re-key the problems to the item's id (or its index when it has none).
            fallback = f"{items_key}[{i}]"
            for k in range(before, len(problems)):
                p = problems[k]
                problems[k] = Problem(
                    p.file, p.item if p.item != "-" else fallback, p.field, p.message, p.line
                )
        else:
            valid.append(parsed)
    if header is None:
        return None
    return header.model_copy(update={items_key: valid})


def _list_item_type(annotation: Any) -> type[BaseModel]:
    (inner,) = getattr(annotation, "__args__", (annotation,))
    return cast(type[BaseModel], inner)


def _file_hash(path: Path) -> str:
    return sha256_text(path.read_text(encoding="utf-8", errors="replace"))


def load_kb(path: Path, problems: list[Problem]) -> KnowledgeBase | None:
    """A directory (manifest.yaml + entities/*.yaml) or one file {kb_version, entities}."""
    if not path.exists():
        problems.append(Problem(str(path), "-", "-", "knowledge base not found"))
        return None
    if path.is_file():
        data = read_structured(path, str(path), problems)
        return parse_collection(KnowledgeBase, data, str(path), problems, "entities", "entity_id")
    return _load_kb_dir(path, problems)


def _load_kb_dir(path: Path, problems: list[Problem]) -> KnowledgeBase | None:
    manifest_path = path / KB_MANIFEST
    shown_manifest = str(manifest_path)
    manifest = read_structured(manifest_path, shown_manifest, problems)
    version = manifest.get("kb_version") if isinstance(manifest, dict) else None
    if manifest is not None and not isinstance(version, str | int | float):
        problems.append(Problem(shown_manifest, "-", "kb_version", "missing kb_version label"))
    entity_files = sorted((path / KB_ENTITIES_DIR).glob("*.y*ml"))
    if not entity_files:
        problems.append(Problem(str(path / KB_ENTITIES_DIR), "-", "-", "no entity files found"))
    entities: list[Entity] = []
    for file in entity_files:
        shown = str(file)
        entity = parse_model(Entity, read_structured(file, shown, problems), shown, problems, "entity_id")
        if entity is None:
            continue
        if entity.entity_id != file.stem:
            problems.append(
                Problem(shown, entity.entity_id, "entity_id", f"does not match file name {file.name}")
            )
        entities.append(entity)
    if version is None or not entities:
        return None
    return KnowledgeBase(kb_version=str(version), entities=entities)


def load_banks(root: Path, problems: list[Problem]) -> Banks:
    banks = Banks(root=root)
    if not root.is_dir():
        problems.append(Problem(str(root), "-", "-", "banks directory not found"))
        return banks
    models: dict[Mechanism, type[BaseModel]] = {
        Mechanism.SEMANTIC: SemanticBank,
        Mechanism.STATE: StateBank,
        Mechanism.PATTERN: PatternBank,
        Mechanism.ALWAYS: AlwaysBank,
    }
    for mechanism, rel in BANK_FILES.items():
        file = root / rel
        if file.exists():
            banks.file_hashes[rel] = _file_hash(file)
            loaded = parse_collection(
                models[mechanism], read_structured(file, str(file), problems), str(file), problems
            )
            setattr(banks, mechanism.value, loaded)
    if not banks.file_hashes:
        problems.append(Problem(str(root), "-", "-", "no test bank files found"))
    rules_file = root / RULES_FILE
    if rules_file.exists():
        banks.file_hashes[RULES_FILE] = _file_hash(rules_file)
        banks.rules = parse_model(
            PatternRules,
            read_structured(rules_file, str(rules_file), problems),
            str(rules_file),
            problems,
        )
    elif (root / BANK_FILES[Mechanism.PATTERN]).exists():
        problems.append(Problem(str(rules_file), "-", "-", "pattern tests need a rules file"))
    return banks


def load_history(directory: Path, problems: list[Problem]) -> list[LoadedHistory]:
    """The history files in `directory` (for a banks root: `root / HISTORY_DIR`)."""
    out: list[LoadedHistory] = []
    for file in sorted(directory.glob(HISTORY_GLOB)):
        entry = parse_model(HistoryFile, read_structured(file, str(file), problems), str(file), problems)
        if entry is not None:
            out.append(LoadedHistory(path=file, entry=entry))
    return out


def history_hash(history: Sequence[LoadedHistory]) -> str:
    """Content hash of the whole history, for asset data versions and result provenance."""
    return sha256_text("".join(sorted(h.entry.model_dump_json() for h in history)))


def files_hash(files: Sequence[Path], root: Path) -> str:
    """Hash of file names (relative to `root`) and contents: a cheap change detector for sources."""
    parts = []
    for file in sorted(files):
        parts.append(f"{file.relative_to(root)}:{_file_hash(file)}")
    return sha256_text("\n".join(parts))


def kb_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else []


def bank_files(root: Path) -> list[Path]:
    """The bank and rules files (not the history, which has its own source)."""
    return [root / rel for rel in (*BANK_FILES.values(), RULES_FILE) if (root / rel).exists()]


def history_files(root: Path) -> list[Path]:
    return sorted((root / HISTORY_DIR).glob(HISTORY_GLOB))
