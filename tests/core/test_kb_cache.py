"""The stored, validated KB (`core/inputs/kb_cache.py`): trusted only while every KB file is the
file it was, rebuilt (never half-trusted) when anything changed or the stored file is damaged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from eval_pipeline.core.inputs.identity import evaluation_identity
from eval_pipeline.core.inputs.kb import KnowledgeBase
from eval_pipeline.core.inputs.kb_cache import RACY_NS, KbCache, _Stored
from eval_pipeline.core.inputs.loading import InputError, Problem, load_kb
from eval_pipeline.core.inputs.validation import load_validated

REPO = Path(__file__).resolve().parents[2]


def _settled() -> int:
    """A clock for which every file the test just wrote is older than the racy window."""
    return time.time_ns() + 10 * RACY_NS


@pytest.fixture
def sample(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the sample KB (a directory of entity files) and its banks."""
    shutil.copytree(REPO / "kb", tmp_path / "kb")
    shutil.copytree(REPO / "test_banks", tmp_path / "banks")
    return tmp_path / "kb", tmp_path / "banks"


def _cache(tmp_path: Path) -> KbCache:
    return KbCache(tmp_path / "cache", clock=_settled)


def _stored(cache: KbCache, kb: Path) -> KnowledgeBase:
    """Load through the cache (from the files) and store it, as a successful load does."""
    loaded, from_store, store = cache.load(kb, [])
    assert loaded is not None and not from_store and store is not None, "a settled KB is stored"
    store()
    assert cache.file_for(kb).is_file()
    return loaded


def _hit(cache: KbCache, kb: Path) -> KnowledgeBase:
    """Load through the cache and require that the stored KB answered (nothing to store)."""
    loaded, from_store, store = cache.load(kb, [])
    assert loaded is not None and from_store and store is None, "expected the stored KB"
    return loaded


def _same(cached: KnowledgeBase, fresh: KnowledgeBase) -> None:
    assert cached == fresh
    assert cached.content_hash == fresh.content_hash  # the KB hash results carry, same value
    assert [e.content_hash for e in cached.entities] == [e.content_hash for e in fresh.entities]
    assert [e.model_fields_set for e in cached.entities] == [e.model_fields_set for e in fresh.entities]
    assert cached.model_dump() == fresh.model_dump()


@pytest.mark.parametrize("which", ["sample", "tenant"])
def test_the_stored_kb_equals_the_kb_loaded_from_its_files(
    which: str, sample: tuple[Path, Path], tenant: Path, tmp_path: Path
) -> None:
    kb, banks = sample if which == "sample" else (tenant / "kb.yaml", tenant / "banks")
    cache = _cache(tmp_path)
    fresh = load_kb(kb, [])
    assert fresh is not None
    _stored(cache, kb)
    cached = _hit(cache, kb)
    _same(cached, fresh)
    # Everything downstream sees the same evaluation identity (KB hash, entity digests).
    with_cache = load_validated(kb, banks, kb_cache=cache)
    without = load_validated(kb, banks)
    assert with_cache[0] == without[0]
    assert evaluation_identity(*with_cache, "h", {}) == evaluation_identity(*without, "h", {})


def _entity_file(kb: Path) -> Path:
    return sorted((kb / "entities").glob("*.yaml"))[0]


def _next_tick(tmp_path: Path, ctime_ns: int) -> None:
    """Wait until the filesystem's clock has moved past `ctime_ns` (a tick is milliseconds): an
    edit in the same tick is the racy case, which a real run never stores (see the racy test)."""
    probe = tmp_path / "probe"
    probe.touch()
    while os.stat(probe).st_ctime_ns <= ctime_ns:
        probe.touch()


def test_an_edit_of_the_same_size_with_its_mtime_put_back_is_still_seen(
    sample: tuple[Path, Path], tmp_path: Path
) -> None:
    kb, _ = sample
    cache = _cache(tmp_path)
    _stored(cache, kb)
    file = _entity_file(kb)
    before = os.stat(file)
    _next_tick(tmp_path, before.st_ctime_ns)
    title = _hit(cache, kb).by_id[file.stem].title
    edited = title[:-1] + ("X" if title[-1] != "X" else "Y")  # one ASCII letter: the same size
    file.write_text(file.read_text(encoding="utf-8").replace(title, edited, 1), encoding="utf-8")
    os.utime(file, ns=(before.st_atime_ns, before.st_mtime_ns))  # what `touch -r` would restore
    after = os.stat(file)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
    loaded = cache.load(kb, []).kb
    assert loaded is not None
    # The ctime moved (no user can set it back), so the file was read again.
    assert loaded.by_id[file.stem].title == edited
    fresh = load_kb(kb, [])
    assert fresh is not None and loaded.content_hash == fresh.content_hash


def test_an_edited_file_is_read_again(sample: tuple[Path, Path], tmp_path: Path) -> None:
    kb, _ = sample
    cache = _cache(tmp_path)
    stored = _stored(cache, kb)
    file = _entity_file(kb)
    file.write_text(file.read_text(encoding="utf-8") + "\n# a comment changes no entity\n", encoding="utf-8")
    loaded, from_store, store = cache.load(kb, [])
    assert not from_store and store is not None  # loaded from the files, to be stored again
    assert loaded == stored  # a comment: the same entities


def test_a_deleted_file_is_no_longer_in_the_kb(sample: tuple[Path, Path], tmp_path: Path) -> None:
    kb, _ = sample
    cache = _cache(tmp_path)
    stored = _stored(cache, kb)
    file = _entity_file(kb)
    file.unlink()
    loaded = cache.load(kb, []).kb
    assert loaded is not None
    assert file.stem not in {e.entity_id for e in loaded.entities}
    assert len(loaded.entities) == len(stored.entities) - 1


def test_an_added_file_is_in_the_kb(sample: tuple[Path, Path], tmp_path: Path) -> None:
    kb, _ = sample
    cache = _cache(tmp_path)
    _stored(cache, kb)
    source = _entity_file(kb)
    added = source.with_name("zz_added_entity.yaml")
    added.write_text(
        source.read_text(encoding="utf-8").replace(source.stem, "zz_added_entity"), encoding="utf-8"
    )
    loaded = cache.load(kb, []).kb
    assert loaded is not None and "zz_added_entity" in {e.entity_id for e in loaded.entities}


def _damage(file: Path, how: str) -> None:
    data = file.read_bytes()
    head, _, body = data.partition(b"\n")
    header = json.loads(head)
    if how == "truncated":
        file.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        file.write_bytes(b"\x00\xffnot a cache at all")
    elif how == "empty":
        file.write_bytes(b"")
    elif how == "payload edited":  # valid JSON, plausible, but not what was checksummed
        payload = json.loads(body)
        payload["kb"]["entities"][0]["title"] = "Tampered title"
        file.write_bytes(head + b"\n" + json.dumps(payload).encode())
    elif how == "other code":  # stored by another version of the code
        header["code"] = "0" * 64
        file.write_bytes(json.dumps(header).encode() + b"\n" + body)
    elif how == "other files":  # a header claiming files it was not taken of
        header["files"] = header["files"][1:]
        file.write_bytes(json.dumps(header).encode() + b"\n" + body)
    elif how == "a directory":
        file.unlink()
        file.mkdir()


@pytest.mark.parametrize("read_before", [False, True], ids=["unread", "read before"])
@pytest.mark.parametrize(
    "how", ["truncated", "garbage", "empty", "payload edited", "other code", "other files", "a directory"]
)
def test_a_damaged_or_foreign_cache_file_is_ignored_and_rebuilt(
    how: str, read_before: bool, sample: tuple[Path, Path], tmp_path: Path
) -> None:
    kb, _ = sample
    cache = _cache(tmp_path)
    fresh = _stored(cache, kb)
    if read_before:  # the process keeps what it read: a damaged file must not answer from there
        _hit(cache, kb)
        _next_tick(tmp_path, os.stat(cache.file_for(kb)).st_ctime_ns)
    _damage(cache.file_for(kb), how)
    loaded, from_store, store = cache.load(kb, [])
    assert loaded is not None and not from_store, "loaded from the files, never from the damaged file"
    assert store is not None
    _same(loaded, fresh)
    if how == "a directory":
        cache.file_for(kb).rmdir()
    store()
    _same(_hit(cache, kb), fresh)  # rebuilt: the next load is a hit with the same result


def test_a_kb_loaded_again_in_the_process_is_not_read_again_while_its_stored_file_is_the_same(
    sample: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb, _ = sample
    cache = _cache(tmp_path)
    _stored(cache, kb)
    validated: list[bytes] = []
    real = _Stored.model_validate_json

    def counted(body: bytes) -> _Stored:
        validated.append(body)
        return real(body)

    monkeypatch.setattr(_Stored, "model_validate_json", counted)
    first = _hit(cache, kb)
    assert _hit(cache, kb) is first and len(validated) == 1
    # The same bytes in a new file (as the store replaces one): read and validated again.
    stored = cache.file_for(kb)
    copy = stored.with_suffix(".copy")
    shutil.copyfile(stored, copy)
    copy.replace(stored)
    _same(_hit(cache, kb), first)
    assert len(validated) == 2
    # An entity edited in place: the kept header no longer matches the KB's files.
    file = _entity_file(kb)
    file.write_text(file.read_text(encoding="utf-8") + "\n# a comment changes no entity\n", encoding="utf-8")
    assert not cache.load(kb, []).from_store


def test_files_changed_within_the_racy_window_are_not_stored(
    sample: tuple[Path, Path], tmp_path: Path
) -> None:
    kb, _ = sample
    newest = max(os.stat(f).st_ctime_ns for f in kb.rglob("*") if f.is_file())
    cache = KbCache(tmp_path / "cache", clock=lambda: newest + 1)  # just after the copy was made
    loaded, from_store, store = cache.load(kb, [])
    assert loaded is not None and not from_store and store is None
    assert not cache.file_for(kb).exists()


def test_refresh_reads_the_files_and_stores_them_and_a_dry_run_writes_nothing(
    sample: tuple[Path, Path], tmp_path: Path
) -> None:
    kb, _ = sample
    _stored(_cache(tmp_path), kb)
    refresh = KbCache(tmp_path / "cache", read=False, clock=_settled)
    loaded, from_store, store = refresh.load(kb, [])
    assert loaded is not None and not from_store and store is not None
    dry = KbCache(tmp_path / "dry", write=False, clock=_settled)
    assert dry.load(kb, []).store is None
    assert not (tmp_path / "dry").exists()


def test_bad_input_stores_nothing(sample: tuple[Path, Path], tmp_path: Path) -> None:
    kb, banks = sample
    bank = banks / "semantic" / "parent_test_bank.json"
    bank.write_text(bank.read_text(encoding="utf-8").replace('"expected_primary"', '"expected_primry"', 1))
    cache = _cache(tmp_path)
    with pytest.raises(InputError):
        load_validated(kb, banks, kb_cache=cache)
    assert not (tmp_path / "cache").exists()


def test_a_kb_with_a_bad_entity_is_reported_and_not_stored(sample: tuple[Path, Path], tmp_path: Path) -> None:
    kb, _ = sample
    file = _entity_file(kb)
    file.write_text(file.read_text(encoding="utf-8").replace("load_mode:", "load_mood:", 1), encoding="utf-8")
    problems: list[Problem] = []
    store = _cache(tmp_path).load(kb, problems).store
    assert problems and store is None


def test_a_value_json_cannot_carry_keeps_the_kb_from_being_stored(tmp_path: Path) -> None:
    # YAML reads an unquoted date as a date; JSON would give it back as a string.
    kb = tmp_path / "kb.yaml"
    kb.write_text(
        "kb_version: v1\nentities:\n"
        "  - {entity_id: due_soon, entity_type: HANDLER, load_mode: STATE, title: Due, summary: Due soon,\n"
        "     content: Something is due., state_conditions: {due: {eq: 2026-01-31}}}\n",
        encoding="utf-8",
    )
    cache = _cache(tmp_path)
    loaded, from_store, store = cache.load(kb, [])
    assert loaded is not None and not from_store and store is not None
    store()
    assert not cache.file_for(kb).exists()
    again = cache.load(kb, []).kb
    assert again == loaded


def test_the_cache_folder_is_ignored_by_git_and_the_kb_is_untouched(
    sample: tuple[Path, Path], tmp_path: Path
) -> None:
    kb, banks = sample

    def files() -> dict[Path, bytes]:
        return {f: f.read_bytes() for root in (kb, banks) for f in root.rglob("*") if f.is_file()}

    before = files()
    cache = _cache(tmp_path)
    load_validated(kb, banks, kb_cache=cache)
    load_validated(kb, banks, kb_cache=cache)
    assert files() == before
    stored = cache.file_for(kb)
    assert stored.is_file() and stored.is_relative_to(tmp_path / "cache")
    # `run`'s default cache folder is git-ignored, so a stored KB never lands in tracked data.
    relative = Path(".cache") / stored.relative_to(tmp_path / "cache")
    ignored = subprocess.run(["git", "check-ignore", "-q", str(relative)], cwd=REPO, check=False)
    assert ignored.returncode == 0
