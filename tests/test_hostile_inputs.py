"""Hostile inputs and a hostile machine fail in one clear line, on the sample and the tenant
domain: nesting 100,000 deep in YAML and JSON, 20,000-character flags, a disk that fills mid-run,
the file-size and open-file limits (exit 3, naming the path and the limit, no health without a
gate decision), input files that lead out of their folders, `--split` as a path, unrecognised
files in `entities/`, and the leftovers of an interrupted import.

The commands that could crash the interpreter (a parser recursing in C) or that need a limit set
on the process run as child processes, as a user would run them."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from eval_pipeline.cli import main
from tests.beir_fixture import tenant_as_beir, write_beir
from tests.conftest import REPO
from tests.kb_folder import kb_as_folder

DEEP = 100_000
DATE = "2026-11-21"
MODEL = "local-minilm"
FULL_DISK_SITE = REPO / "tests" / "full_disk_site"
HEALTHS = ("EXCELLENT", "GOOD", "FAIR", "POOR", "CRITICAL", "UNKNOWN")


class Project(NamedTuple):
    root: Path  # the working folder: models.yaml, results, storage, the instance
    kb: Path
    banks: Path
    entity: Path  # a file holding one entity (the KB itself for a single-file KB)
    bank: Path  # a JSON bank file


@pytest.fixture(params=["sample", "tenant"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Project:
    root = tmp_path / "project"
    if request.param == "sample":
        shutil.copytree(REPO / "kb", root / "kb")
        shutil.copytree(REPO / "test_banks", root / "test_banks")
        kb, banks = root / "kb", root / "test_banks"
        entity, bank = kb / "entities" / "biff_response.yaml", banks / "state" / "state_handler_tests.json"
    else:
        shutil.copytree(REPO / "tests/fixtures/tenant_domain", root)
        kb, banks = root / "kb.yaml", root / "banks"
        entity, bank = kb, banks / "state" / "tenant_states.json"
    shutil.copy(REPO / "models.yaml", root / "models.yaml")
    return Project(root, kb, banks, entity, bank)


def _cli(
    project: Project, *args: str, env: dict[str, str] | None = None, limit: Callable[[], None] | None = None
) -> tuple[int, str, str]:
    """The command line as a child process in the project's folder: (exit code, stdout, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "eval_pipeline.cli", *args],
        cwd=project.root,
        env={**os.environ, "DAGSTER_HOME": str(project.root / ".dagster_home"), **(env or {})},
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, done.stdout, done.stderr


def _data_args(project: Project) -> list[str]:
    return ["--kb", str(project.kb), "--banks-dir", str(project.banks)]


def _main(argv: list[str]) -> int:
    """The command line in this process; a usage error's exit code as the process would give it."""
    try:
        return main(argv)
    except SystemExit as exit_:  # argparse ends the process on a bad flag
        return int(exit_.code or 0)


def _problems(err: str) -> list[str]:
    """The problem lines of a bad-input exit, checked to be lines and no traceback."""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[-1] == f"{len(lines) - 1} problem(s) found", err
    return lines[:-1]


# --- nesting ----------------------------------------------------------------------------------


def test_yaml_nested_100000_deep_in_the_kb_is_one_line_for_validate_and_run(project: Project) -> None:
    text = project.entity.read_text()
    project.entity.write_text(text + "deep:\n" + "- " * DEEP + "x\n")
    for command in (["validate"], ["run", "--model", MODEL, "--date", DATE]):
        code, _, err = _cli(project, *command, *_data_args(project))
        assert code == 2, err
        lines = _problems(err)
        assert lines[0] == f"{project.entity}: nested more than 100 levels deep; at most 100 are allowed"
        assert not [line for line in lines if "unknown entity" in line]
    assert not (project.root / "results").exists()


def test_yaml_nested_100000_deep_in_models_yaml_is_one_line(project: Project) -> None:
    models = project.root / "models.yaml"
    models.write_text("schema_version: 1\nmodels: " + "[" * DEEP + "]" * DEEP + "\n")
    code, _, err = _cli(project, "run", "--model", MODEL, "--date", DATE, *_data_args(project))
    assert (code, err) == (
        2,
        f"error: {models.name}: nested more than 100 levels deep; at most 100 are allowed\n",
    )


def test_json_nested_100000_deep_in_a_bank_is_one_line(project: Project) -> None:
    data = json.loads(project.bank.read_text())
    project.bank.write_text(json.dumps(data)[:-1] + ', "deep": ' + "[" * DEEP + "]" * DEEP + "}")
    code, _, err = _cli(project, "validate", *_data_args(project))
    assert code == 2
    assert _problems(err) == [f"{project.bank}: nested more than 100 levels deep; at most 100 are allowed"]


@pytest.fixture(params=["fixture", "tenant"])
def beir(request: pytest.FixtureRequest, tenant: Path, tmp_path: Path) -> Path:
    """A BEIR folder: the fixture's own set, or the tenant domain's."""
    if request.param == "tenant":
        return tenant_as_beir(tenant, tmp_path / "beir")
    return write_beir(tmp_path / "beir")


def test_json_nested_100000_deep_in_a_beir_corpus_line_is_one_line(
    beir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = beir
    corpus = src / "corpus.jsonl"
    corpus.write_text(corpus.read_text() + '{"_id": "deep", "text": ' + "[" * DEEP + "]" * DEEP + "}\n")
    lines = corpus.read_text().count("\n")
    new = tmp_path / "new"
    code = main(["import-beir", str(src), "--kb", str(new / "kb"), "--banks-dir", str(new / "banks")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"{corpus}:{lines}: nested more than 100 levels deep" in err.splitlines()[0]
    assert not new.exists() or not list(new.iterdir())  # nothing written, no staging left


def test_a_diffed_results_file_nested_100000_deep_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "results.json"
    deep.write_text('{"provenance": ' + "[" * DEEP + "]" * DEEP + "}")
    assert main(["diff", str(deep), str(deep)]) == 2
    message = "nested more than 100 levels deep; at most 100 are allowed"
    assert capsys.readouterr().err == f"error: {deep}: not a readable results document ({message})\n"


# --- flags ------------------------------------------------------------------------------------

LONG = "x" * 20_000


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["override", "{test}", "--primary", "{entity}", "--by", "me", "--reason", LONG], "--reason"),
        (["override", "{test}", "--primary", "{entity}", "--by", LONG, "--reason", "why"], "--by"),
        (["validate", "--kb", LONG], "--kb"),
        (["show", "--model", LONG], "--model"),
        (["run", "--model", MODEL, "--junit", LONG], "--junit"),
        (["import-beir", "beir", "--kb", "new/kb", "--banks-dir", "new/banks", "--split", LONG], "--split"),
        (["import-beir", "beir", "--kb", "new/kb", "--banks-dir", "new/banks", "--name", LONG], "--name"),
    ],
    ids=[
        "override-reason",
        "override-by",
        "validate-kb",
        "show-model",
        "run-junit",
        "import-beir-split",
        "import-beir-name",
    ],
)
def test_a_20000_character_flag_is_one_line_naming_the_flag(
    project: Project,
    argv: list[str],
    flag: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(project.root)
    monkeypatch.setenv("DAGSTER_HOME", str(project.root / ".dagster_home"))
    bank = json.loads(next(project.banks.glob("semantic/*.json")).read_text())
    first = bank["tests"][0]
    names = {"test": first["test_id"], "entity": first["expected_primary"][0]}
    argv = [part.format(**names) if part != LONG else part for part in argv]
    if argv[0] in ("override", "run"):
        argv += _data_args(project)
    before = sorted(project.root.rglob("*"))
    code = _main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert f"argument {flag}: " in err or err.startswith(f"error: {flag}: "), err
    assert LONG not in err  # the value is shortened, not echoed whole
    assert sorted(project.root.rglob("*")) == before


# --- a machine that runs out ------------------------------------------------------------------


def _run_verdict(project: Project, **options: object) -> tuple[int, str, list[str]]:
    code, out, err = _cli(project, "run", "--model", MODEL, "--date", DATE, *_data_args(project), **options)  # type: ignore[arg-type]
    assert "Traceback" not in out + err
    # The tenant fixture's banks hold a legal check that warns; the rest is what went wrong.
    return code, out, [line for line in err.strip().splitlines() if not line.startswith("warning: ")]


def _no_health_shown(out: str) -> None:
    """No summary line (`model @ date: HEALTH — ...`) and no report path were printed."""
    assert not [
        line
        for line in out.splitlines()
        if line.startswith(f"{MODEL} @ ") and any(h in line for h in HEALTHS)
    ]
    assert "  report: " not in out and "  results: " not in out


def test_a_disk_that_fills_mid_run_is_one_line_naming_the_file_and_the_space_left(project: Project) -> None:
    # The disk holding the model's results fills up after its first file (results.json): the
    # next write's sync fails with ENOSPC, as a full disk reports it.
    folder = project.root / "results" / MODEL
    env = {
        "PYTHONPATH": str(FULL_DISK_SITE),
        "EVAL_PIPELINE_TEST_FULL_DISK": str(folder),
        "EVAL_PIPELINE_TEST_FULL_DISK_AFTER": "1",
    }
    code, out, lines = _run_verdict(project, env=env)
    assert code == 3
    assert len(lines) == 1, lines
    assert re.fullmatch(
        rf"error: {MODEL}: run_report: no space left on the disk writing "
        rf"\S*results/{MODEL}/{DATE}/report\.md \([\d,]+ bytes free\)",
        lines[0],
    ), lines
    _no_health_shown(out)
    assert (folder / DATE / "results.json").is_file() and not (folder / DATE / "gate.json").exists()


def _limit(which: int, value: int) -> Callable[[], None]:
    def set_limit() -> None:
        resource.setrlimit(which, (value, value))

    return set_limit


def test_the_file_size_limit_is_one_line_naming_the_file_and_the_limit(project: Project) -> None:
    code, out, lines = _run_verdict(project, limit=_limit(resource.RLIMIT_FSIZE, 200_000))
    assert code == 3 and len(lines) == 1, lines
    assert re.fullmatch(
        r"error: (\S+: )*file too large writing \S+: the file-size limit \(ulimit -f\) is 200,000 bytes",
        lines[0],
    ), lines
    _no_health_shown(out)


# 16: too few to start (a file the command opens is named); 21 and 33: enough to start, too
# few for a run step, which is not begun (inside one, Dagster's half-made event loop printed
# "Exception ignored ... _ssock" before the cause, and a step's documents failed part-way).
@pytest.mark.parametrize("files", [16, 21, 33])
def test_the_open_file_limit_is_one_line_naming_the_limit(project: Project, files: int) -> None:
    code, out, err = _cli(
        project,
        "run",
        "--model",
        MODEL,
        "--date",
        DATE,
        *_data_args(project),
        limit=_limit(resource.RLIMIT_NOFILE, files),
    )
    lines = [line for line in err.strip().splitlines() if not line.startswith("warning: ")]
    assert code == 3 and len(lines) == 1, err
    assert "Exception ignored" not in err and "Traceback" not in out + err
    assert re.fullmatch(
        rf"error: (\S+: )*too many open files (opening \S+|to run shared): "
        rf"the open-file limit \(ulimit -n\) is {files}(, \d+ are open and a run step needs up to 48 more)?",
        lines[0],
    ), lines
    if files > 16:
        assert "to run shared" in lines[0]
    _no_health_shown(out)


# --- contained folders ------------------------------------------------------------------------


def _outside_file(tmp_path: Path, text: str) -> Path:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    target = elsewhere / f"file{len(list(elsewhere.iterdir()))}.txt"
    target.write_text(text)
    return target


def test_entity_and_bank_files_that_lead_out_of_their_folders_are_refused(
    project: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = project.kb if project.kb.is_dir() else kb_as_folder(project.root)
    entity = next((kb / "entities").glob("*.yaml"))
    entity.unlink()
    entity.symlink_to(_outside_file(tmp_path, "entity_id: leaked\n"))
    project.bank.unlink()
    project.bank.symlink_to(_outside_file(tmp_path, "{}"))
    history = project.banks / "semantic" / "history"
    history.mkdir(exist_ok=True)
    (history / "expectations_2026-11-01.json").symlink_to(_outside_file(tmp_path, "{}"))
    assert main(["validate", "--kb", str(kb), "--banks-dir", str(project.banks)]) == 2
    lines = _problems(capsys.readouterr().err)
    elsewhere = tmp_path / "elsewhere"
    for file in (entity, project.bank, history / "expectations_2026-11-01.json"):
        said = [line for line in lines if line.startswith(f"{file}: leads to {elsewhere}/")]
        assert len(said) == 1 and "input files must be inside their folder" in said[0], lines
    assert not [line for line in lines if "leaked" in line]  # never parsed


def test_unrecognised_files_in_the_entities_folder_are_named_in_a_warning(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = project.kb if project.kb.is_dir() else kb_as_folder(project.root)
    entities = kb / "entities"
    (entities / "Shouting.YAML").write_text("entity_id: shouting\n")
    (entities / "nested").mkdir()
    (entities / ".editor.swp").write_text("")  # hidden: editors' own files are not named
    assert main(["validate", "--kb", str(kb), "--banks-dir", str(project.banks)]) == 0
    warnings = [
        line for line in capsys.readouterr().err.splitlines() if line.startswith(f"warning: {entities}")
    ]
    assert warnings == [
        f"warning: {entities / 'Shouting.YAML'}: not loaded: "
        "not an entity file name (*.yaml or *.yml, in lower case)",
        f"warning: {entities / 'nested'}: not loaded: a folder: entity files are read from entities/ itself, "
        "not its subfolders",
    ]


@pytest.mark.parametrize("split", ["../../../../etc/passwd", "..", "a/b", ""])
def test_split_is_one_file_name(split: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_beir(tmp_path / "beir")
    code = _main(
        [
            "import-beir",
            str(src),
            "--kb",
            str(tmp_path / "new/kb"),
            "--banks-dir",
            str(tmp_path / "new/banks"),
            "--split",
            split,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and "argument --split: " in err, err
    assert "not a split name: one file name in qrels/" in err and not (tmp_path / "new").exists()


def test_an_interrupted_imports_leftovers_are_removed_when_it_starts_again(
    beir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = beir
    new = tmp_path / "new"
    killed = new / ".kb.importing-999999999-x1"  # a process id no process has
    running = new / f".banks.importing-{os.getpid()}-x2"  # this process: an import still going
    for folder in (killed, running):
        (folder / "entities").mkdir(parents=True)
    assert main(["import-beir", str(src), "--kb", str(new / "kb"), "--banks-dir", str(new / "banks")]) == 0
    assert "removed 1 temporary folder(s) left by an interrupted import" in capsys.readouterr().out
    assert not killed.exists() and running.is_dir()
    assert sorted(p.name for p in new.iterdir()) == [running.name, "banks", "kb", "models.yaml"]
