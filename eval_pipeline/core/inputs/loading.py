"""Read the KB and the banks directory from disk, collecting every problem instead of stopping.

A problem names the file (with the line for syntax errors), the test or entity id, and the
field. Callers print them one per line and exit 2; nothing here raises for a user mistake.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_pipeline.core.control_chars import one_line
from eval_pipeline.core.errors import BadInput
from eval_pipeline.core.fileio import BadFile, read_input_text
from eval_pipeline.core.inputs.banks import (
    LAYOUT_FILE,
    AlwaysBank,
    AnyTest,
    BankLayout,
    Mechanism,
    PatternBank,
    PatternRules,
    SemanticBank,
    SemanticTest,
    StateBank,
)
from eval_pipeline.core.inputs.file_reader import Loc, load_input, owner
from eval_pipeline.core.inputs.history_file import HISTORY_GLOB, HistoryFile, LoadedHistory, name_problem
from eval_pipeline.core.inputs.kb import Entity, KnowledgeBase, Vocabulary, sha256_text

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
        # "-" marks an item or field that does not apply: it is left out, not printed.
        parts = [where, *(part for part in (self.item, self.field) if part != "-"), self.message]
        return one_line(": ".join(parts))


class InputError(BadInput):
    """Bad user input; carries every problem found: the `problems` of the files themselves first,
    then the `later` ones found across files (which a broken file may have caused)."""

    def __init__(self, problems: Sequence[Problem], later: Sequence[Problem] = ()) -> None:
        self.problems = [*sorted(problems), *sorted(later)]
        super().__init__("\n".join(str(p) for p in self.problems))


class Banks(BaseModel):
    """Everything under `--banks-dir`. A bank whose file is absent is simply not run."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    root: Path
    layout: BankLayout = Field(default_factory=BankLayout)
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

    def bank(self, mechanism: Mechanism) -> SemanticBank | StateBank | PatternBank | AlwaysBank | None:
        """The bank of `mechanism` (each bank's field is named for its mechanism)."""
        bank: SemanticBank | StateBank | PatternBank | AlwaysBank | None = getattr(self, mechanism.value)
        return bank

    def tests(self, mechanism: Mechanism) -> Sequence[AnyTest]:
        bank = self.bank(mechanism)
        return bank.tests if bank else []

    def test_ids(self) -> set[str]:
        return {t.test_id for m in Mechanism for t in self.tests(m)}

    def counts(self) -> dict[Mechanism, int]:
        return {m: len(bank.tests) for m in Mechanism if (bank := self.bank(m)) is not None}


def read_structured(path: Path, problems: list[Problem]) -> Any:
    """Parse JSON or YAML by extension (strictly: see file_reader.py); on failure record one problem,
    return None. An empty (or `null`) file is a problem too: a file that is there means to say
    something."""
    try:
        data = load_input(path)
    except BadFile as exc:
        problems.append(Problem(str(path), exc.item, exc.field, exc.message, exc.line))
        return None
    if data is None:
        problems.append(Problem(str(path), "-", "-", "file is empty (or null)"))
    return data


def _report(exc: ValidationError, data: Any, at: Loc, shown: str, problems: list[Problem]) -> None:
    """One problem per error, naming its item in `data` (where the validated part lies: `at`)."""
    for err in exc.errors():
        # pydantic marks dict-key errors with a "[key]" step; the key itself is enough.
        loc = (*at, *(part for part in err["loc"] if part != "[key]"))
        problems.append(Problem(shown, *owner(data, loc), err["msg"]))


def parse_model(
    model: type[M], data: Any, shown: str, problems: list[Problem], items_key: str = "tests"
) -> M | None:
    """`data` as `model`, or None with its problems recorded. A model holding a list of items
    (`items_key`) that fails is validated item by item, so that one bad test doesn't hide the
    problems of the others: the result then holds only the valid items."""
    if data is None:
        return None
    try:
        return model.model_validate(data)  # valid as a whole: the usual case
    except ValidationError as exc:
        items = data.get(items_key) if isinstance(data, dict) else None
        if not (items and isinstance(items, list) and items_key in model.model_fields):
            _report(exc, data, (), shown, problems)
            return None
    (item_model,) = get_args(model.model_fields[items_key].annotation)  # list[Item]
    header = parse_model(model, {**data, items_key: []}, shown, problems, items_key)
    valid: list[Any] = []
    for i, item in enumerate(items):
        try:
            valid.append(item_model.model_validate(item))
        except ValidationError as exc:
            _report(exc, data, (items_key, i), shown, problems)
    return None if header is None else header.model_copy(update={items_key: valid})


def _file_hash(path: Path) -> str:
    try:
        return sha256_text(read_input_text(path))
    except BadFile:
        return "unreadable"  # reported when the file itself is read


def _present(path: Path) -> bool:
    """There, or a link that claims to be (a dangling or looping link is reported, not skipped)."""
    return path.exists() or path.is_symlink()


# Input files stay inside their folders, links included: a link that leads elsewhere (to
# /etc/passwd, to another project) is refused before it is opened, naming where it leads.
def _escapes(file: Path, folder: str, what: str, problems: list[Problem]) -> bool:
    """Whether `file` resolves outside `folder` (resolved by os.path.realpath; then a problem)."""
    target = os.path.realpath(file)
    if target == folder or target.startswith(folder.rstrip(os.sep) + os.sep):
        return False
    message = f"leads to {target}, outside {what}: input files must be inside their folder"
    problems.append(Problem(str(file), "-", "-", message))
    return True


def read_layout(root: Path, problems: list[Problem]) -> BankLayout:
    file = root / LAYOUT_FILE
    if not _present(file) or _escapes(file, os.path.realpath(root), f"the banks folder {root}", problems):
        return BankLayout()
    return parse_model(BankLayout, read_structured(file, problems), str(file), problems) or BankLayout()


def history_dir(root: Path) -> Path:
    """The history folder of the banks under `root` (per its banks.yaml)."""
    return root / read_layout(root, []).history


def load_kb(path: Path, problems: list[Problem]) -> KnowledgeBase | None:
    """A directory (manifest.yaml + entities/*.yaml) or one file {kb_version, entities}."""
    if not _present(path):
        problems.append(Problem(str(path), "-", "-", "knowledge base not found"))
        return None
    if not path.is_dir():
        data = read_structured(path, problems)
        return parse_model(KnowledgeBase, data, str(path), problems, "entities")
    return _load_kb_dir(path, problems)


def is_entity_file(name: str) -> bool:
    """What `Path.glob("*.y*ml")` matches (case-sensitive on POSIX, hidden names too): a ".y"
    somewhere before a final "ml". Tested on the names os.scandir gives: thousands of Path objects,
    or a regular expression per name, cost more than the listing itself."""
    return name.endswith("ml") and ".y" in name[:-2]


@dataclass(frozen=True)
class EntityFolder:
    """What a KB directory's entities folder holds."""

    names: list[str]  # the entity files, in the order they load
    links: list[str]  # those of them that are links (checked to stay inside the KB)
    unrecognised: list[str]  # visible names that are not entity files (*.YAML, subfolders, ...)


def entity_folder(path: Path) -> EntityFolder:
    names: list[str] = []
    links: list[str] = []
    unrecognised: list[str] = []
    try:
        with os.scandir(path / KB_ENTITIES_DIR) as entries:
            for entry in entries:
                if is_entity_file(entry.name):
                    names.append(entry.name)
                    if entry.is_symlink():
                        links.append(entry.name)
                elif not entry.name.startswith("."):  # hidden: editors' and systems' own files
                    unrecognised.append(entry.name)
    except OSError:  # no entities folder (reported as "no entity files found")
        pass
    return EntityFolder(sorted(names), links, sorted(unrecognised))


def entity_folder_warnings(kb_path: Path) -> list[Problem]:
    """Files in a KB directory's entities folder that are not loaded, each named (a `*.YAML`
    or a subfolder would otherwise be skipped without a word)."""
    if not kb_path.is_dir():
        return []
    folder = kb_path / KB_ENTITIES_DIR
    out = []
    for name in entity_folder(kb_path).unrecognised:
        file = folder / name
        why = "not an entity file name (*.yaml or *.yml, in lower case)"
        if file.is_dir():
            why = "a folder: entity files are read from entities/ itself, not its subfolders"
        out.append(Problem(str(file), "-", "-", f"not loaded: {why}"))
    return out


def unread_entities(kb_path: Path, problems: Sequence[Problem]) -> frozenset[str]:
    """Ids of the entities whose own file or item has a problem: for a KB directory, the names of
    the entity files with problems (a file that cannot be parsed names no id), else the ids the
    problems name."""
    entities_dir = str(kb_path / KB_ENTITIES_DIR)
    return frozenset(
        Path(p.file).stem if str(Path(p.file).parent) == entities_dir else p.item
        for p in problems
        if p.item != "-" or str(Path(p.file).parent) == entities_dir
    )


def _load_kb_dir(path: Path, problems: list[Problem]) -> KnowledgeBase | None:
    manifest_path = path / KB_MANIFEST
    shown_manifest = str(manifest_path)
    manifest = read_structured(manifest_path, problems)
    fields = manifest if isinstance(manifest, dict) else {}
    version = fields.get("kb_version")
    if manifest is not None and not isinstance(manifest, dict):
        problems.append(Problem(shown_manifest, "-", "-", "a manifest is a mapping (kb_version, vocabulary)"))
    elif manifest is not None and not isinstance(version, str | int | float):
        problems.append(Problem(shown_manifest, "-", "kb_version", "missing kb_version label"))
    vocabulary = parse_model(Vocabulary, fields.get("vocabulary") or {}, shown_manifest, problems)
    listing = entity_folder(path)
    entity_files = [path / KB_ENTITIES_DIR / name for name in listing.names]
    if not entity_files:
        problems.append(Problem(str(path / KB_ENTITIES_DIR), "-", "-", "no entity files found"))
    escaping = _escaping(path, listing, problems)
    entities: list[Entity] = []
    for file in entity_files:
        if file.name in escaping:
            continue
        entity = parse_model(Entity, read_structured(file, problems), str(file), problems)
        if entity is None:
            continue
        if entity.entity_id != file.stem:
            mismatch = f"does not match file name {file.name}"
            problems.append(Problem(str(file), entity.entity_id, "entity_id", mismatch))
        entities.append(entity)
    if version is None or not entities or vocabulary is None:
        return None
    name = fields.get("name")
    return KnowledgeBase(
        kb_version=str(version), name=str(name) if name else None, vocabulary=vocabulary, entities=entities
    )


def _escaping(path: Path, listing: EntityFolder, problems: list[Problem]) -> set[str]:
    """The entity files (by name) that resolve outside the KB folder, each a problem. Only links
    can: unless the entities folder itself leads elsewhere, then every file does."""
    kb_real, folder, what = os.path.realpath(path), path / KB_ENTITIES_DIR, f"the KB {path}"
    if listing.names and _escapes(folder, kb_real, what, problems):
        return set(listing.names)
    return {name for name in listing.links if _escapes(folder / name, kb_real, what, problems)}


def load_banks(root: Path, problems: list[Problem]) -> Banks:
    if not root.is_dir():
        what = "is not a directory" if _present(root) else "not found"
        problems.append(Problem(str(root), "-", "-", f"banks directory {what}"))
        return Banks(root=root)
    banks = Banks(root=root, layout=read_layout(root, problems))
    layout, root_real, what = banks.layout, os.path.realpath(root), f"the banks folder {root}"
    # Each file is read into the field of its name: a mechanism's bank, then the rules.
    files = {**{m.value: rel for m, rel in layout.banks().items()}, "rules": layout.rules}
    for name, rel in files.items():
        file = root / rel
        if not _present(file):
            continue
        if _escapes(file, root_real, what, problems):
            banks.file_hashes[rel] = "outside"
            continue
        banks.file_hashes[rel] = _file_hash(file)
        model = get_args(Banks.model_fields[name].annotation)[0]  # of `Model | None`
        setattr(banks, name, parse_model(model, read_structured(file, problems), str(file), problems))
    if not _present(root / layout.rules) and _present(root / layout.pattern):
        problems.append(Problem(str(root / layout.rules), "-", "-", "pattern tests need a rules file"))
    if not any(_present(root / rel) for rel in layout.banks().values()):
        problems.append(Problem(str(root), "-", "-", "no test bank files found"))
    return banks


def load_history(directory: Path, problems: list[Problem]) -> list[LoadedHistory]:
    """The history files in `directory` (for a banks root: `history_dir(root)`)."""
    out: list[LoadedHistory] = []
    if not directory.is_dir():
        if _present(directory):  # absent is no history yet; anything else there is a mistake
            problems.append(Problem(str(directory), "-", "-", "history folder is not a directory"))
        return out
    folder, what = os.path.realpath(directory), f"the history folder {directory}"
    # Every visible entry is a history file: a misnamed one must not be silently left out.
    # Hidden ones are the writers' lock and temp files.
    for file in sorted(p for p in directory.iterdir() if not p.name.startswith(".")):
        misnamed = name_problem(file.name)
        if misnamed:
            problems.append(Problem(str(file), "-", "-", misnamed))
            continue
        if _escapes(file, folder, what, problems):
            continue
        entry = parse_model(HistoryFile, read_structured(file, problems), str(file), problems)
        if entry is None:
            continue
        out_of_order = name_problem(file.name, entry)
        if out_of_order:
            problems.append(Problem(str(file), "-", "version", out_of_order))
        out.append(LoadedHistory(path=file, entry=entry))
    return out


def history_hash(history: Sequence[LoadedHistory]) -> str:
    """Content hash of the whole history, for asset data versions and result provenance."""
    return sha256_text("".join(sorted(h.entry.model_dump_json() for h in history)))


def files_hash(files: Sequence[Path], root: Path) -> str:
    """Hash of file names (relative to `root`) and contents: a cheap change detector for sources."""
    return sha256_text("\n".join(f"{file.relative_to(root)}:{_file_hash(file)}" for file in sorted(files)))


def kb_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else []


def bank_files(root: Path) -> list[Path]:
    """The layout file, the bank and rules files (not the history, which has its own source)."""
    layout = read_layout(root, [])
    files = [LAYOUT_FILE, *layout.banks().values(), layout.rules]
    return [root / rel for rel in files if (root / rel).is_file()]


def history_files(root: Path) -> list[Path]:
    return sorted(history_dir(root).glob(HISTORY_GLOB))
