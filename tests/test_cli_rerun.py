"""`run` twice with nothing changed: today's stored evaluation stands, and only then.

Tenant domain, local models, the project's own instance settings (no step output captured:
tests/quiet_instance.py). Each change that could alter
a result or a verdict makes the next run evaluate again; a result that holds an unknown (an
errored test) is never reused; `--force` always evaluates."""

from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stdout
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME

from eval_pipeline.cli import main
from eval_pipeline.core.calibration.files import LOG_FILE, append_log
from eval_pipeline.core.calibration.records import CalibrationRecord
from eval_pipeline.core.dates import today_utc
from eval_pipeline.core.scoring.run_document import read_document
from eval_pipeline.location import instance_home
from eval_pipeline.orchestration.execution import project_instance
from eval_pipeline.orchestration.standing import FINGERPRINT_TAG, HISTORY_DIR, RECORDS_DIR, instance_mark
from eval_pipeline.providers.models import ModelConfig
from tests.conftest import REPO, TENANT
from tests.quiet_instance import quiet_home
from tests.test_import_sets import RERUN, probe_run

DATA = ["--kb", "tenant/kb.yaml", "--banks-dir", "tenant/banks"]
MINILM = "local-minilm"
STANDS = "up to date:"


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one working directory of this file's tests, emptied for each: a run's fingerprint
    holds its results and storage folders' absolute paths, so a copied evaluation can stand
    only where it was made."""
    return tmp_path_factory.mktemp("rerun") / "work"


def _enter(place: Path, mp: pytest.MonkeyPatch, source: Path | None = None) -> Path:
    """`place` afresh (the tenant copy beside the models file) or as a copy of `source`, as the
    working directory, with its own Dagster home and no API keys."""
    if place.exists():
        shutil.rmtree(place)
    if source is None:
        place.mkdir()
        shutil.copytree(TENANT, place / "tenant")
        shutil.copy(REPO / "models.yaml", place / "models.yaml")
    else:
        shutil.copytree(source, place, symlinks=True)
    mp.chdir(place)
    mp.setenv("DAGSTER_HOME", str(quiet_home(place / "dagster_home")))
    mp.delenv("ANTHROPIC_API_KEY", raising=False)
    mp.delenv("VOYAGE_API_KEY", raising=False)
    return place


@pytest.fixture
def workdir(place: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return _enter(place, monkeypatch)


@pytest.fixture(scope="module")
def first_evaluation(place: Path) -> Path:
    """A copy of the project after its first run (today, local-minilm), the start of several
    tests: made once, as each of them would make it."""
    with pytest.MonkeyPatch.context() as mp:
        _enter(place, mp)
        printed = io.StringIO()
        with redirect_stdout(printed):
            code = main(["run", *DATA, "--model", MINILM])
        assert (code, STANDS in printed.getvalue(), len(_runs())) == (0, False, 3), printed.getvalue()
    copy = place.parent / "first_evaluation"
    shutil.copytree(place, copy, symlinks=True)
    return copy


@pytest.fixture
def evaluated(place: Path, first_evaluation: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory as the first run of today left it."""
    return _enter(place, monkeypatch, first_evaluation)


@pytest.fixture(scope="module")
def yesterday_evaluation(place: Path, first_evaluation: Path) -> Path:
    """A copy of the project after its first run and then yesterday's (a past date evaluated
    later), where the tests of other dates begin: made once, as each of them would make it."""
    with pytest.MonkeyPatch.context() as mp:
        _enter(place, mp, first_evaluation)
        printed = io.StringIO()
        with redirect_stdout(printed):
            code = main(["run", *DATA, "--model", MINILM, "--date", _yesterday()])
        # Three runs of its own, and one that compares today's evaluation with it again.
        assert (code, STANDS in printed.getvalue(), _run_logs()) == (0, False, 7), printed.getvalue()
    copy = place.parent / "yesterday_evaluation"
    shutil.copytree(place, copy, symlinks=True)
    return copy


def _yesterday() -> str:
    return (date.fromisoformat(today_utc()) - timedelta(days=1)).isoformat()


def _recorded_here(day: str) -> None:
    """The day's recorded evaluation marked with this copy's instance files: they are the files
    it was recorded with, under other inode numbers, which the mark holds so that a replaced file
    never passes for the one recorded."""
    home = instance_home()
    record = json.loads((home / RECORDS_DIR / f"{day}.json").read_text())
    record["instance_mark"] = instance_mark(home)
    (home / RECORDS_DIR / f"{day}.json").write_text(json.dumps(record))


@pytest.fixture
def yesterday_evaluated(place: Path, yesterday_evaluation: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory as yesterday's run left it, after today's, its record of yesterday
    valid here."""
    _enter(place, monkeypatch, yesterday_evaluation)
    _recorded_here(_yesterday())
    return place


def _runs() -> list[dg.DagsterRun]:
    with project_instance() as instance:
        return list(instance.get_runs())


def _run_logs() -> int:
    """How many runs the project instance holds, counted without opening it (two instances a
    call were a tenth of this file's CPU): its storage keeps each run's events in a database of
    their own beside the index (orchestration/instance_storage.py)."""
    logs = instance_home() / HISTORY_DIR / "runs"
    return len([p for p in logs.glob("*.db") if p.stem != INDEX_SHARD_NAME])


def _run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, int]:
    """(exit code, stdout, Dagster runs it made)."""
    before = _run_logs()
    code = main(["run", *DATA, "--model", MINILM, *extra])
    return code, capsys.readouterr().out, _run_logs() - before


def _evaluates(
    capsys: pytest.CaptureFixture[str],
    *extra: str,
    code: int = 0,
    because: str = "",
    later: int = 0,
    standing: int = 0,
) -> str:
    """Evaluates every model named but `standing` of them; `because`: why local-minilm does."""
    got, out, made = _run(capsys, *extra)
    # The date's, each model evaluated, the comparison; and the regression diff of each model's
    # next later evaluation (`later`), which compares with this one now.
    evaluated = 1 + extra.count("--model") - standing
    assert (got, out.count(STANDS), made) == (code, standing, 2 + evaluated + later), out
    assert f"  evaluating {MINILM}: {because}" in out if because else True, out
    return out


def _stands(capsys: pytest.CaptureFixture[str], *extra: str, code: int = 0) -> str:
    got, out, made = _run(capsys, *extra)
    assert (got, out.count(STANDS), made) == (code, 1 + extra.count("--model"), 0), out
    return out


def test_an_unchanged_rerun_stands_with_the_same_verdict(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = ["--model", "local-hybrid"]
    _evaluates(capsys, *both)
    results = {m: workdir / "results" / m / today_utc() / "results.json" for m in (MINILM, "local-hybrid")}
    written = {m: f.read_bytes() for m, f in results.items()}
    out = _stands(capsys, *both)
    # The same summary as the run printed, read from the same files, which are untouched.
    assert f"{MINILM} @ {today_utc()}:" in out and f"local-hybrid @ {today_utc()}:" in out
    assert {m: f.read_bytes() for m, f in results.items()} == written
    runs = _runs()
    fingerprints = {r.tags.get(FINGERPRINT_TAG) for r in runs}
    assert len(fingerprints) == 1 and None not in fingerprints
    assert set(json.loads(fingerprints.pop() or "")) == {MINILM, "local-hybrid"}
    # Each model's line names the run that evaluated it.
    assert all(r.run_id[:8] in out for r in runs if r.job_name == "evaluate_model")
    # Each model stands on its own: one of the two alone stands too.
    _stands(capsys)
    # --force evaluates again, and so do --cache refresh/off (answers computed afresh); the
    # stored evaluation they leave stands too. One model: the same rule, half the runs.
    _evaluates(capsys, "--force")
    _evaluates(capsys, "--cache", "refresh")
    _evaluates(capsys, "--cache", "off")
    _stands(capsys)


def test_every_change_to_what_a_verdict_rests_on_evaluates_again(
    evaluated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _stands(capsys)

    kb = evaluated / "tenant/kb.yaml"
    text = kb.read_text()
    assert "Keep copies of every message" in text
    kb.write_text(text.replace("Keep copies of every message", "Keep a copy of every message"))
    _evaluates(capsys, because="the KB changed\n")
    _stands(capsys)

    bank = evaluated / "tenant/banks/state/tenant_states.json"
    states = json.loads(bank.read_text())
    bank.write_text(json.dumps(states, indent=4))  # same tests, other bytes: the bank's hash moved
    _evaluates(capsys, because="test banks changed: state\n")

    # A gate is part of the verdict; the results files cannot tell it changed, the runs' tags can.
    _evaluates(capsys, "--fail-under", "100", code=1, because="the gates changed\n")
    _stands(capsys, "--fail-under", "100", code=1)
    _evaluates(capsys, because="the gates changed\n")

    models = yaml.safe_load((evaluated / "models.yaml").read_text())
    models["models"][MINILM]["description"] = "the same model, described again"
    (evaluated / "models.yaml").write_text(yaml.safe_dump(models))
    _evaluates(capsys, because=f"the models file changed for {MINILM}\n")

    elsewhere = evaluated / "elsewhere"
    _evaluates(capsys, "--results-dir", str(elsewhere), because=f"no stored evaluation for {MINILM} on ")
    # The earlier results folder's runs are no longer the latest.
    _evaluates(capsys, because="results/storage location changed\n")

    results = evaluated / "results" / MINILM / today_utc() / "results.json"
    results.write_text(results.read_text().replace('"health": "', '"health":  "', 1))  # edited by hand
    _evaluates(capsys, because=f"{results.relative_to(evaluated)} is not the file its run wrote")
    results.unlink()
    _evaluates(capsys, because=f"no stored evaluation for {MINILM} on {today_utc()}\n")
    (results.parent / "report.md").unlink()
    _evaluates(capsys, because=f"{results.parent.relative_to(evaluated)} no longer holds its report and gate")
    _stands(capsys)


def _corrupt(cache: Path) -> Path:
    """`cache` holding a response and an embedding cache that are not databases."""
    cache.mkdir(exist_ok=True)
    for name in ("embeddings.sqlite3", "responses.sqlite3"):
        (cache / name).write_text("not a database")
    return cache


def test_a_result_with_errored_tests_is_never_reused(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A corrupt response cache errors every semantic test: UNKNOWN, exit 3, then again, and
    # once the cache is mended the run evaluates rather than repeat the unknown.
    cache = _corrupt(workdir / "corrupt-cache")
    _evaluates(capsys, "--cache-dir", str(cache), code=3)
    _evaluates(capsys, "--cache-dir", str(cache), code=3, because="8 test(s) errored\n")
    shutil.rmtree(cache)
    _evaluates(capsys, "--cache-dir", str(cache), because="8 test(s) errored\n")
    _stands(capsys, "--cache-dir", str(cache))
    doc = read_document(workdir / "results" / MINILM / today_utc() / "results.json")
    assert doc.aggregate.errored_count == 0


def test_a_retried_evaluation_stands_unless_its_inputs_changed(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its errored tests, asked again once the cache is mended, were merged into the stored
    # evaluation by a run carrying the same inputs: nothing is evaluated (or paid for) again.
    cache = _corrupt(workdir / "corrupt-cache")
    _evaluates(capsys, "--cache-dir", str(cache), code=3)
    shutil.rmtree(cache)
    assert main(["run", *DATA, "--model", MINILM, "--cache-dir", str(cache), "--retry-errored"]) == 0
    assert STANDS not in capsys.readouterr().out
    _stands(capsys, "--cache-dir", str(cache))
    doc = read_document(workdir / "results" / MINILM / today_utc() / "results.json")
    assert doc.aggregate.errored_count == 0

    # Errored again, then the KB edited before the retry: the merge is on an evaluation of the
    # old KB, so the next run evaluates again, saying why.
    _corrupt(cache)
    _evaluates(capsys, "--cache-dir", str(cache), "--force", code=3)
    shutil.rmtree(cache)
    kb = workdir / "tenant/kb.yaml"
    kb.write_text(kb.read_text().replace("Keep copies of every message", "Keep a copy of every message"))
    assert main(["run", *DATA, "--model", MINILM, "--cache-dir", str(cache), "--retry-errored"]) == 0
    capsys.readouterr()
    _evaluates(capsys, "--cache-dir", str(cache), because="the KB changed\n")


@pytest.mark.usefixtures("yesterday_evaluated")
def test_a_later_evaluation_of_another_date_compares_again_and_the_evaluation_stands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Yesterday's evaluation, made after today's, compared today's with it again (a run of its
    # own): today's stored report names its new baseline, and today's evaluation stands.
    out = _stands(capsys)
    assert f"since {_yesterday()}, 1 day earlier" in out, out
    report = (Path("results") / MINILM / today_utc() / "report.md").read_text()
    assert f"## Since last run ({_yesterday()}, 1 day earlier)" in report


@pytest.mark.usefixtures("yesterday_evaluated")
def test_a_past_date_stands_only_as_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    # A past date evaluates that day's snapshot of the inputs, which the fingerprint of today's
    # files describes only while the instance has stored nothing since (no observation that
    # would pick another snapshot, no other date's report): then the recorded evaluation stands.
    yesterday = _yesterday()
    _stands(capsys, "--date", yesterday)
    _evaluates(capsys, "--force")  # today's runs are stored since: yesterday's record no longer answers
    since = "other evaluations were stored since (a past date stands only as recorded)"
    _evaluates(capsys, "--date", yesterday, later=1, because=since)
    _stands(capsys, "--date", yesterday)
    _evaluates(capsys, "--date", yesterday, "--force", later=1)


def test_an_unchanged_rerun_of_any_date_decides_without_dagster(
    place: Path, first_evaluation: Path, yesterday_evaluation: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a user's next `run` imports, in a fresh interpreter (tests/test_import_sets.py), where
    # the fixtures evaluated each date in process through Dagster.
    yesterday = _yesterday()
    for source, day, when in (
        (yesterday_evaluation, yesterday, ["--date", yesterday]),
        (first_evaluation, today_utc(), []),
    ):
        _enter(place, monkeypatch, source)
        _recorded_here(day)
        code, out, imported = probe_run(place, "run", *DATA, "--model", MINILM, *when)
        assert code in (0, 1) and STANDS in out, out
        assert imported & RERUN == set(), (when, imported)


def test_a_recorded_evaluation_stands_only_with_the_instance_it_was_recorded_with(
    evaluated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = evaluated / "dagster_home" / RECORDS_DIR
    assert [p.name for p in records.iterdir()] == [f"{today_utc()}.json"]
    record = json.loads((records / f"{today_utc()}.json").read_text())
    assert list(record["models"]) == [MINILM]
    record["instance_mark"] = "0" * 64  # as if the instance had stored something since
    (records / f"{today_utc()}.json").write_text(json.dumps(record))
    _stands(capsys)  # the instance is asked, says it stands, and the record is made anew
    assert json.loads((records / f"{today_utc()}.json").read_text())["instance_mark"] != "0" * 64
    results = evaluated / "results" / MINILM / today_utc() / "results.json"
    results.write_text(results.read_text().replace('"health": "', '"health":  "', 1))  # edited by hand
    _evaluates(capsys, because="results/")


def test_a_model_running_team_code_always_evaluates(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The team's entry point may change, or answer differently, with no input of ours changed.
    models = yaml.safe_load((workdir / "models.yaml").read_text())
    entrypoint = {"state": "tests.system_under_test:async_state"}
    models["models"]["team-python"] = {
        "embedder": {"kind": "local"},
        "reranker": {"kind": "cosine"},
        "system": {"kind": "python", "entrypoint": entrypoint, "mechanisms": ["state"]},
    }
    (workdir / "models.yaml").write_text(yaml.safe_dump(models))
    monkeypatch.setenv("SUT_KB", str(workdir / "tenant/kb.yaml"))
    monkeypatch.setenv("SUT_BANKS", str(workdir / "tenant/banks"))
    monkeypatch.syspath_prepend(str(REPO))
    for _ in range(2):
        code = main(["run", *DATA, "--model", "team-python"])
        assert code == 0 and STANDS not in capsys.readouterr().out
    # Beside a model of this package alone, which stands on its own once evaluated.
    _evaluates(capsys, "--model", "team-python")
    _evaluates(capsys, "--model", "team-python", standing=1)


@pytest.mark.parametrize(
    ("stages", "reproducible"),
    [
        ({"embedder": {"kind": "local"}, "reranker": {"kind": "hybrid"}}, True),
        ({"embedder": {"kind": "local"}, "reranker": {"kind": "cosine", "jitter": 0.1, "seed": 3}}, True),
        (
            {"embedder": {"kind": "local"}, "reranker": {"kind": "claude", "model_id": "claude-haiku-4-5"}},
            False,
        ),
        ({"embedder": {"kind": "voyage", "model_id": "voyage-3.5"}, "reranker": {"kind": "cosine"}}, False),
        ({"system": {"kind": "http", "url": "http://127.0.0.1:9/"}}, False),
    ],
)
def test_only_models_of_this_package_alone_are_reproducible(
    stages: dict[str, object], reproducible: bool
) -> None:
    assert ModelConfig.model_validate({"key": "m", **stages}).reproducible is reproducible


def _log_calibration(workdir: Path, cost_usd: float) -> None:
    record = {
        "calibration_id": "cal-1",
        "started_at": datetime.now(UTC).isoformat(),
        "duration_s": 1.0,
        "scope": "single",
        "trigger": "manual",
        "test_ids": [],
        "model": "claude-opus-4-5",
        "prompt_version": "v1",
        "kb_version": "tenant-fixture-1",
        "kb_hash": "0" * 64,
        "mode": "sequential",
        "changed": 0,
        "unchanged": 1,
        "usage": {},
        "cost_usd": cost_usd,
        "kb_prefix_tokens": 0,
    }
    append_log(workdir / "calibration" / LOG_FILE, CalibrationRecord.model_validate(record))


def test_a_calibration_that_changed_nothing_still_evaluates_again(
    evaluated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its cost is in every report of the day, though no expectation moved.
    _log_calibration(evaluated, 0.25)
    _evaluates(capsys, because=f"a calibration was logged for {today_utc()}\n")
    doc = read_document(evaluated / "results" / MINILM / today_utc() / "results.json")
    assert doc.provenance.calibration_cost_usd == 0.25
    _stands(capsys)


def test_an_unreadable_calibration_log_is_bad_input(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "calibration").mkdir()
    (workdir / "calibration" / LOG_FILE).write_text("{not json")
    code = main(["run", *DATA, "--model", MINILM, "--force"])
    out, err = capsys.readouterr()
    assert (code, _runs()) == (2, []) and "Traceback" not in out + err
    error = err.splitlines()[-1]  # after the tenant banks' warnings
    assert error.startswith("error: ") and "calibration_log.json: " in error and err.count("error") == 1
    assert "not a valid calibration log" in error
    assert not (workdir / "results").exists()
