"""Exit codes are a contract: every command's failure paths, outages included, on real runs.

Each case is a row of the exit-code table in docs/verdicts.md (`| command | situation | code |`):
the test runs it and checks both the code and that the page says the same.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path

import pytest
import yaml

from eval_pipeline import cli
from eval_pipeline.core.scoring.run_document import read_document
from eval_pipeline.core.verdicts.run_gate import GateDecision, GateStatus
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator
from tests.quiet_instance import quiet_home
from tests.run_docs import doc, sem

REPO = Path(__file__).resolve().parents[1]
VERDICTS_PAGE = (REPO / "docs" / "verdicts.md").read_text(encoding="utf-8")
D1, D2 = "2026-11-19", "2026-11-20"
FAKE_ANTHROPIC_KEY = "sk-ant-test-0000-not-a-real-key"
FAKE_VOYAGE_KEY = "pa-test-0000-not-a-real-key"
DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks"]
DOWN = "a bank with under half its tests scored (API down, corrupt cache)"
UNKNOWN_FLAG = "unknown `--model`, `--test` or `--topic`"
NO_RESULTS = "no results, or a corrupt `results.json`"
DIFF_FAILS = "a new critical failure, a deterministic regression, a stable or significant semantic one"
INTERNAL = "an internal error (`--debug` shows the traceback)"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tenant domain evaluated on two dates: D1 clean, D2 with a crisis rule gone (CRITICAL)."""
    root = tmp_path_factory.mktemp("exit_codes")
    shutil.copytree(REPO / "tests/fixtures/tenant_domain", root / "tenant")
    models = yaml.safe_load((REPO / "models.yaml").read_text())
    no_retries = {"max_attempts": 1, "backoff_s": 0}
    models["models"]["dead-target"] = {
        "embedder": {"kind": "http"},
        "reranker": {"kind": "http"},
        "http": {"url": f"http://127.0.0.1:{_closed_port()}/target", "timeout_s": 2},
        "retry": no_retries,
    }
    models["models"]["api-down"] = {
        "enabled": False,
        "embedder": {"kind": "voyage", "model_id": "voyage-3.5"},
        "reranker": {"kind": "claude", "model_id": "claude-haiku-4-5"},
        "rate_limit_per_min": 6000,
        "retry": no_retries,
    }
    models["models"]["team-key"] = {
        **models["models"]["api-down"],
        "anthropic_api_key_env": "TEAM_ANTHROPIC_KEY",
        "voyage_api_key_env": "TEAM_VOYAGE_KEY",
    }
    models["models"]["dead-target"]["enabled"] = False
    (root / "models.yaml").write_text(yaml.safe_dump(models))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("DAGSTER_HOME", str(quiet_home(root / "dagster_home")))
        for name in ("ANTHROPIC_API_KEY", "VOYAGE_API_KEY", "ANTHROPIC_BASE_URL", "VOYAGE_BASE_URL"):
            mp.delenv(name, raising=False)
        assert _run("--date", D1) == 0
        rules = root / "tenant/banks/pattern/pattern_rules.json"
        clean_rules = rules.read_text()
        data = json.loads(clean_rules)
        data["crisis_patterns"] = []
        rules.write_text(json.dumps(data))
        assert _run("--date", D2) == 1
        rules.write_text(clean_rules)
        yield root


def _run(*extra: str) -> int:
    return cli.main(["run", *DATA, "--model", "local-minilm", *extra])


@contextmanager
def _api(emulator: EmulatorHandle, anthropic_var: str, voyage_var: str) -> Iterator[None]:
    """Fake keys under the given variable names, and the SDKs pointed at the loopback emulator."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(anthropic_var, FAKE_ANTHROPIC_KEY)
        mp.setenv(voyage_var, FAKE_VOYAGE_KEY)
        mp.setenv("ANTHROPIC_BASE_URL", emulator.base_url)
        mp.setenv("VOYAGE_BASE_URL", emulator.voyage_base_url)
        yield


def _gate(root: Path, model: str, date: str) -> GateDecision:
    return GateDecision.model_validate_json((root / "results" / model / date / "gate.json").read_text())


def _in_docs(command: str, situation: str, code: int) -> None:
    row = f"| `{command}` | {situation} | {code} |"
    assert row in VERDICTS_PAGE, f"docs/verdicts.md's exit-code table lacks: {row}"


def _expect(
    capsys: pytest.CaptureFixture[str], command: str, situation: str, code: int, actual: int
) -> tuple[str, str]:
    out, err = capsys.readouterr()
    _check(command, situation, code, actual, out, err)
    return out, err


def _check(command: str, situation: str, code: int, actual: int, out: str, err: str) -> None:
    assert actual == code, f"{command}: {situation}: exit {actual}\n{out}\n{err}"
    assert "Traceback" not in out + err
    _in_docs(command, situation, code)


@pytest.fixture(scope="module")
def dead_target(work: Path) -> tuple[int, str, str]:
    """The dead HTTP target's run on D1 (exit code, output, errors): its own test reads it, and
    `diff`'s, whichever runs first or alone."""
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(["run", *DATA, "--model", "dead-target", "--date", D1, "--fail-under", "80"])
    return code, out.getvalue(), err.getvalue()


def test_run(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _expect(capsys, "run", "ran, every gate met", 0, _run("--date", D1, "--banks", "state"))
    _expect(capsys, "run", "a critical failure (health CRITICAL)", 1, 1)  # the fixture's D2 run
    assert _gate(work, "local-minilm", D2).status is GateStatus.FAILED
    _expect(
        capsys,
        "run",
        "`--fail-under` not met",
        1,
        _run("--date", D1, "--banks", "semantic", "--fail-under", "100"),  # scores below 100
    )
    _, err = _expect(capsys, "run", UNKNOWN_FLAG, 2, _run("--topic", "nosuch"))
    assert err.startswith("error: --topic: unknown topic 'nosuch'")


def test_run_when_the_system_under_test_is_down(work: Path, dead_target: tuple[int, str, str]) -> None:
    # A dead HTTP target: every semantic test errors. Never GOOD, never a passed gate.
    code, out, err = dead_target
    _check("run", DOWN, 3, code, out, err)
    assert "dead-target @ 2026-11-19: UNKNOWN" in out and "COULD NOT EVALUATE semantic: 0 of 8" in out
    report = read_document(work / "results/dead-target" / D1 / "results.json")
    assert report.aggregate.health.value == "UNKNOWN" and report.aggregate.combined_score is None
    assert _gate(work, "dead-target", D1).status is GateStatus.UNEVALUABLE


def test_run_when_the_api_answers_500(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with (
        start_emulator(fault_rate=1.0, faults=("500",)) as emulator,
        _api(emulator, "ANTHROPIC_API_KEY", "VOYAGE_API_KEY"),
    ):
        code = cli.main(["run", *DATA, "--model", "api-down", "--date", D1, "--fail-under", "80"])
    out, err = capsys.readouterr()
    assert code == 3 and "Traceback" not in out + err
    assert "GOOD" not in out and "EXCELLENT" not in out
    assert FAKE_ANTHROPIC_KEY not in out + err and FAKE_VOYAGE_KEY not in out + err


def test_run_with_a_corrupt_response_cache(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = work / "corrupt-cache"
    cache.mkdir()
    for name in ("embeddings.sqlite3", "responses.sqlite3"):
        (cache / name).write_text("not a database")
    code = _run("--date", D1, "--banks", "semantic", "--cache-dir", str(cache), "--fail-under", "80")
    out, _ = _expect(capsys, "run", DOWN, 3, code)
    assert "UNKNOWN" in out and "could not evaluate semantic" in out


def test_validate(work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok = cli.main(["validate", *DATA])
    _expect(capsys, "validate", "KB and banks are valid", 0, ok)
    banks = tmp_path / "banks"
    shutil.copytree(work / "tenant/banks", banks)
    (banks / "state/tenant_states.json").write_text("{")
    bad = cli.main(["validate", "--kb", "tenant/kb.yaml", "--banks-dir", str(banks)])
    _expect(capsys, "validate", "a bad KB or bank file", 2, bad)


def test_show(work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _expect(capsys, "show", "results found", 0, cli.main(["show", "--model", "local-minilm", "--date", D1]))
    empty = cli.main(["show", "--results-dir", str(tmp_path / "none")])
    _expect(capsys, "show", NO_RESULTS, 2, empty)
    broken = tmp_path / "results/m" / D1
    broken.mkdir(parents=True)
    (broken / "results.json").write_text('{"provenance": 3}')
    _, err = _expect(
        capsys,
        "show",
        NO_RESULTS,
        2,
        cli.main(["show", "--results-dir", str(tmp_path / "results")]),
    )
    assert "results.json: provenance: Input should be an object" in err


def test_diff(
    work: Path, dead_target: tuple[int, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = cli.main(["diff", f"local-minilm@{D1}", f"local-minilm@{D1}"])
    _expect(capsys, "diff", "no regression beyond noise", 0, same)
    out, _ = _expect(
        capsys,
        "diff",
        DIFF_FAILS,
        1,
        cli.main(["diff", f"local-minilm@{D1}", f"local-minilm@{D2}"]),
    )
    assert out.splitlines()[1:4] == ["health: GOOD → CRITICAL", "gate: FAILED", out.splitlines()[3]]
    assert "new critical failure(s): T-PAT-CRISIS-001" in out.splitlines()[3]
    (tmp_path / "broken.json").write_text("{")
    unreadable = cli.main(["diff", f"local-minilm@{D1}", str(tmp_path / "broken.json")])
    _expect(capsys, "diff", "an unreadable or incompatible results file", 2, unreadable)
    down = cli.main(["diff", f"local-minilm@{D1}", f"dead-target@{D1}"])
    _expect(capsys, "diff", "the head could not be evaluated", 3, down)


def test_models_calibrate_override(work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _expect(capsys, "models", "the models file is valid", 0, cli.main(["models"]))
    (tmp_path / "models.yaml").write_text("models: {x: {embedder: {kind: nope}}}")
    bad = cli.main(["models", "--models-file", str(tmp_path / "models.yaml")])
    _expect(capsys, "models", "an invalid models file", 2, bad)
    calibrate = cli.main(["calibrate", "--scope", "single", *DATA])
    _expect(capsys, "calibrate", "a bad scope, test id or missing API key", 2, calibrate)
    override = cli.main(
        [
            "override",
            "NOPE-1",
            "--by",
            "dr x",
            "--reason",
            "r",
            "--banks-dir",
            "tenant/banks",
            "--kb",
            "tenant/kb.yaml",
        ]
    )
    _expect(capsys, "override", "an unknown test or entity", 2, override)
    review = str(tmp_path / "no_review.json")
    missing = cli.main(["calibrate", "--apply-from", review, "--by", "x", *DATA])
    _expect(capsys, "calibrate", "`--apply-from` a missing, stale or already applied review", 2, missing)
    report = str(tmp_path / "agreement.md")
    cal = str(tmp_path / "cal")
    agreement = cli.main(["agreement", "--calibration-dir", cal, "--report", report, *DATA])
    _expect(capsys, "agreement", "computed (no decisions yet is an empty report)", 0, agreement)
    bad = cli.main(["agreement", "--resamples", "0", *DATA])
    _expect(capsys, "agreement", "a bad flag", 2, bad)


def test_an_internal_error_is_one_line_and_exit_3(
    work: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> str:
        raise RuntimeError("summary renderer exploded\nsecond line")

    monkeypatch.setattr("eval_pipeline.core.report.markdown.console_summary", broken)
    _, err = _expect(capsys, "any", INTERNAL, 3, cli.main(["show"]))
    assert err == (
        "internal error: RuntimeError: summary renderer exploded; rerun with --debug for the traceback\n"
    )
    assert cli.main(["--debug", "show"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_a_closed_pipe_keeps_the_verdict(tmp_path: Path) -> None:
    """`eval-pipeline diff … | head -1`: no traceback, and the exit code is still the diff's."""
    many = [sem(f"S-{i:04d}", ["a", "b"]) for i in range(1500)]
    (tmp_path / "base.json").write_text(doc(many).model_dump_json())
    broken = [*many[:-1], sem("S-1499", ["c"])]
    (tmp_path / "head.json").write_text(doc(broken, date=D2).model_dump_json())
    command = [
        sys.executable,
        "-m",
        "eval_pipeline.cli",
        "diff",
        "base.json",
        "head.json",
        "--format",
        "json",
    ]
    with subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline()
        proc.stdout.close()  # the reader goes away, like `head -1`
        err = proc.stderr.read().decode()
        code = proc.wait(timeout=120)
    assert code == 1 and err == ""
    _in_docs("diff … \\| head", "the reader closes the pipe early", 1)  # \| : a pipe inside a table


def test_a_model_with_its_own_key_variables_runs_end_to_end(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`anthropic_api_key_env: TEAM_ANTHROPIC_KEY` is honoured by `models` and by the run itself."""
    with start_emulator() as emulator, _api(emulator, "TEAM_ANTHROPIC_KEY", "TEAM_VOYAGE_KEY"):
        assert cli.main(["models"]) == 0
        listed = capsys.readouterr().out
        code = cli.main(["run", *DATA, "--model", "team-key", "--date", D1, "--banks", "semantic"])
    out, err = capsys.readouterr()
    assert "team-key" in listed and "needs" not in listed.split("team-key")[1].splitlines()[0]
    assert code in (0, 1) and "Traceback" not in out + err, err
    doc = read_document(work / "results/_scoped/banks-semantic/team-key" / D1 / "results.json")
    assert doc.aggregate.errored_count == 0 and doc.aggregate.health.value != "UNKNOWN"
    assert FAKE_ANTHROPIC_KEY not in out + err and FAKE_VOYAGE_KEY not in out + err
