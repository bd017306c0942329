"""Output locations: a plain local path stays a `Path` (no fsspec to import for it), a URI is a
universal path; both are written the same way (atomically when local)."""

from __future__ import annotations

from pathlib import Path

from upath import UPath

from eval_pipeline.providers.object_store import is_local, local_path, output_location, write_text


def test_a_plain_path_stays_a_path_and_a_uri_becomes_a_universal_path(tmp_path: Path) -> None:
    plain = output_location(tmp_path / "results")
    assert type(plain) is type(tmp_path) and plain == tmp_path / "results"
    uri = output_location(f"file://{tmp_path}/results")
    assert isinstance(uri, UPath) and uri.protocol == "file"
    assert is_local(plain) and is_local(uri)
    assert local_path(plain) == local_path(uri) == tmp_path / "results"


def test_both_kinds_are_written_the_same(tmp_path: Path) -> None:
    write_text(output_location(tmp_path / "a") / "x.json", "{}")
    write_text(output_location(f"memory://{tmp_path}/b") / "x.json", "{}")
    assert (tmp_path / "a" / "x.json").read_text(encoding="utf-8") == "{}"
    memory = UPath(f"memory://{tmp_path}/b/x.json")
    assert not is_local(memory) and memory.read_text() == "{}"
