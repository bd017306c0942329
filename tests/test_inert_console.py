"""What a command prints reaches the terminal inert (core/control_chars.py, cli/console.py): the
control characters of data (an ESC in a `kb_version`, an override's reason, an imported
project's name, an argument) are shown escaped, and a line that quotes data stays one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eval_pipeline.cli import main
from eval_pipeline.core.control_chars import console_text
from tests.beir_fixture import tenant_as_beir

# Every raw control character a terminal would act on: all but the newline ending our lines.
RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
HOSTILE = "\x1b[2J\x1b[Hwiped\x1b]0;retitled\x07 \u202eevil\r\noverwritten\x9b31m"


def raw_controls(output: str) -> list[str]:
    return RAW_CONTROL.findall(output)


@given(st.text())
def test_console_text_keeps_only_newlines_and_a_leading_carriage_return(value: str) -> None:
    shown = console_text(value)
    assert raw_controls(shown.removeprefix("\r")) == []
    assert shown.count("\n") == value.count("\n")


def _data(tenant: Path) -> list[str]:
    return ["--kb", str(tenant / "kb.yaml"), "--banks-dir", str(tenant / "banks")]


def test_validate_shows_a_kb_version_with_escapes_escaped(
    tenant: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = tenant / "kb.yaml"
    kb.write_text(kb.read_text().replace("kb_version: tenant-fixture-1", 'kb_version: "v1\\e[2J\\e[Hwiped"'))
    assert main(["validate", *_data(tenant)]) == 0
    out, err = capsys.readouterr()
    assert raw_controls(out + err) == []
    assert out.startswith("OK: kb v1\\x1b[2J\\x1b[Hwiped (")


def test_an_override_confirmation_is_one_inert_line(tenant: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["override", "T-RENT-001", "--primary", "rent_arrears", "--by", "Dr\x1b]0;x\x07 Lee"]
    assert main([*argv, "--reason", HOSTILE, *_data(tenant)]) == 0
    out, err = capsys.readouterr()
    assert raw_controls(out + err) == []
    first = out.splitlines()[0]
    assert first.startswith("override recorded for T-RENT-001 by Dr\\x1b]0;x\\x07 Lee: \\x1b[2J")
    assert "\\r\\noverwritten" in first


def test_an_imported_projects_name_is_echoed_escaped(
    tenant: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tenant_as_beir(tenant, tmp_path / "beir")
    out_kb, out_banks = tmp_path / "proj" / "kb", tmp_path / "proj" / "banks"
    argv = ["import-beir", str(src), "--kb", str(out_kb), "--banks-dir", str(out_banks)]
    assert main([*argv, "--name", HOSTILE]) == 0
    out, err = capsys.readouterr()
    assert raw_controls(out + err) == []
    assert out.startswith("imported '\\x1b[2J\\x1b[Hwiped") and out.count("\n") == 2


def test_a_usage_error_quotes_the_argument_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--model", f"m{HOSTILE}", "--banks", "semantic"]) == 2
    out, err = capsys.readouterr()
    assert "m\\x1b[2J" in err and raw_controls(out + err) == []
