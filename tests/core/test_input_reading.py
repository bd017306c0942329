"""The one reader behind every input file: what it refuses, and how it names where."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest

from eval_pipeline.core.control_chars import one_line
from eval_pipeline.core.diff.compare import load_for_diff
from eval_pipeline.core.diff.model import DiffError
from eval_pipeline.core.fileio import BadFile, read_input_text
from eval_pipeline.core.inputs.file_reader import load_input, parse_input_text
from eval_pipeline.core.inputs.loading import is_entity_file
from eval_pipeline.core.scoring.run_document import DocumentError, read_document


def _refusal(path: Path, limit: int = 1000) -> BadFile:
    with pytest.raises(BadFile) as err:
        load_input(path, limit)
    return err.value


@pytest.mark.timeout(60)  # a hang guard: opening a FIFO for reading would block
def test_a_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "bank.json"
    os.mkfifo(fifo)
    assert _refusal(fifo).message == "cannot read file: it is a FIFO, not a regular file"


def test_a_device_and_a_directory_are_refused(tmp_path: Path) -> None:
    assert "it is a device" in _refusal(Path(os.devnull)).message
    assert "it is a directory" in _refusal(tmp_path).message


def test_the_size_limit_is_named(tmp_path: Path) -> None:
    path = tmp_path / "kb.yaml"
    path.write_text("a: " + "x" * 1000)
    assert _refusal(path).message == "file is 1,003 bytes, over the 1,000-byte input limit"
    path.write_text("a: " + "x" * 997)
    assert load_input(path, 1000) == {"a": "x" * 997}


@pytest.mark.parametrize(
    ("text", "suffix", "message", "item", "field"),
    [
        ('{"tests": [{"test_id": "T-1", "v": NaN}]}', ".json", "nan is not a finite number", "T-1", "v"),
        ('{"a": {"b": [1, -Infinity]}}', ".json", "-inf is not a finite number", "-", "a.b.1"),
        ('{"a": 1e400}', ".json", "inf is not a finite number", "-", "a"),
        (
            "entity_id: e1\nstate_conditions: {d: {gte: .nan}}\n",
            ".yaml",
            "nan is",
            "e1",
            "state_conditions.d.gte",
        ),
        ("a: 1.0e+400\n", ".yaml", "inf is not a finite number", "-", "a"),
        ('[{"test_id": "T-2", "w": [Infinity]}]', ".json", "inf is not a finite number", "T-2", "w.0"),
        ("- entity_id: e2\n  v: [1.5, -.inf]\n", ".yaml", "-inf is not a finite number", "e2", "v.1"),
        ("a: !!float '1e999'\n", ".yaml", "inf is not a finite number", "-", "a"),
    ],
)
def test_non_finite_numbers_are_refused_where_they_are(
    text: str, suffix: str, message: str, item: str, field: str
) -> None:
    with pytest.raises(BadFile) as err:
        parse_input_text(text, suffix)
    assert err.value.message.startswith(message)
    assert (err.value.item, err.value.field) == (item, field)


@pytest.mark.parametrize(
    ("text", "suffix", "line"), [('{"a": 1, "a": 2}', ".json", None), ("a: 1\nb: 2\na: 3\n", ".yaml", 3)]
)
def test_duplicate_keys_are_refused(text: str, suffix: str, line: int | None) -> None:
    with pytest.raises(BadFile) as err:
        parse_input_text(text, suffix)
    assert err.value.message == "duplicate key 'a'" and err.value.line == line


def test_text_is_utf8_only(tmp_path: Path) -> None:
    path = tmp_path / "models.yaml"
    path.write_bytes(b"a: \xe9t\xe9\n")
    assert _refusal(path).message == "not UTF-8 text (byte 3): save it as UTF-8"
    path.write_text("a: \u00e9t\u00e9\n")
    assert read_input_text(path) == "a: \u00e9t\u00e9\n"


def test_an_error_line_escapes_control_characters() -> None:
    assert one_line("T-1\nerror: forged\x1b[2J\u2028") == "T-1\\nerror: forged\\x1b[2J\\u2028"
    assert one_line("caf\u00e9 \u2013 ok") == "caf\u00e9 \u2013 ok"


@pytest.mark.timeout(60)  # a hang guard: opening a FIFO for reading would block
def test_documents_are_read_only_from_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    with pytest.raises(DiffError, match="not a readable results document \\(cannot read file: it is a FIFO"):
        load_for_diff(fifo)
    with pytest.raises(DocumentError, match="cannot read results document \\(cannot read file: it is a FIFO"):
        read_document(fifo)


@pytest.mark.parametrize(
    "name",
    [
        ".yml",
        "a.yml",
        "a.yaml",
        "a.y.ml",
        ".y.ml",
        "a.yxml",
        "a.YML",
        "a.yml~",
        "a.ml",
        "a.y",
        "yml",
        "a.yl",
        "a.y\nml",
        "a.json",
        "a.yaml.ml",
        "ayml",
        "a.yamlml",
    ],
)
def test_an_entity_file_is_what_the_documented_glob_matches(tmp_path: Path, name: str) -> None:
    # The KB format documents "entities/*.y*ml"; the loader tests names without a glob or a regex.
    if "\n" not in name:
        (tmp_path / name).touch()
        assert is_entity_file(name) == any(tmp_path.glob("*.y*ml"))
    assert is_entity_file(name) == fnmatch.fnmatchcase(name, "*.y*ml")
