"""`eval-pipeline calibrate` and `override` end to end: real CLI, real SDK, the loopback emulator.

Every test works on a temporary copy of the tenant fixture; nothing is written into the repo's
kb/, test_banks/ or calibration/.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from eval_pipeline import cli
from eval_pipeline.cli.calibration_review import walk
from eval_pipeline.core.calibration.files import LOG_FILE, RESPONSES_DIR, read_log
from eval_pipeline.core.calibration.review import REVIEWS_DIR, read_review
from eval_pipeline.core.dates import today_utc  # read when asserting: a run may cross midnight
from eval_pipeline.core.expectations.resolution import ResolvedExpectation, resolve
from eval_pipeline.core.inputs.banks import SemanticTest
from eval_pipeline.core.inputs.loading import history_dir, load_history
from eval_pipeline.core.inputs.validation import load_validated
from eval_pipeline.core.mechanisms.retrieval import Selection, SemanticRetrieval
from eval_pipeline.core.scoring.evaluation import score_semantic
from eval_pipeline.testing.emulator.server import EmulatorHandle, start_emulator

KEY = "sk-ant-test-calibrate-0000-not-real"
BY = ["--by", "Dr Lee", "--reason", "clinical review"]


@pytest.fixture
def emulator() -> Iterator[EmulatorHandle]:
    handle = start_emulator()
    yield handle
    handle.stop()


@pytest.fixture
def work(tenant: Path, tmp_path: Path, emulator: EmulatorHandle, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with a tenant copy; the SDK reaches the emulator through its env vars."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("EVAL_PIPELINE_PRICES", raising=False)
    return tenant


def run(work: Path, *argv: str) -> int:
    data = ["--kb", str(work / "kb.yaml"), "--banks-dir", str(work / "banks")]
    extra = ["--calibration-dir", "calibration", "--rate-per-min", "60000"] if argv[0] == "calibrate" else []
    return cli.main([*argv, *data, *extra])


def output(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    captured = capsys.readouterr()
    assert KEY not in captured.out + captured.err  # the key is never printed
    return captured.out, captured.err


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def history_files(work: Path) -> list[Path]:
    return sorted(history_dir(work / "banks").glob("expectations_*.json"))


def current(work: Path) -> tuple[list[SemanticTest], dict[str, ResolvedExpectation]]:
    _, banks = load_validated(work / "kb.yaml", work / "banks")
    assert banks.semantic is not None
    tests = banks.semantic.tests
    return tests, resolve(tests, load_history(history_dir(work / "banks"), []))


# --- dry run, estimate, apply ----------------------------------------------------------------------


def test_dry_run_shows_estimate_first_then_proposals_and_writes_only_a_review_file(
    work: Path, tmp_path: Path, emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot(tmp_path)
    assert run(work, "calibrate", "--scope", "full") == 0
    out, _ = output(capsys)
    (review_path,) = (tmp_path / "calibration" / REVIEWS_DIR).glob("review_*.json")
    added = set(snapshot(tmp_path)) - set(before)
    assert added == {str(review_path.relative_to(tmp_path))}
    assert {k: v for k, v in snapshot(tmp_path).items() if k in before} == before
    assert out.index("estimate (calibration cost") < out.index("T-RENT-001")
    assert "changed (was original)" in out and "-> " in out and "reasoning" in out
    assert "summary: " in out and "unchanged" in out and "calibration cost $" in out
    assert (
        f"dry run: history untouched; proposals kept for review in {review_path.relative_to(tmp_path)}" in out
    )
    assert emulator.stats["requests"]["POST /v1/messages"] == 8
    review = read_review(review_path)
    assert len(review.items) == len(review.calls) == 8  # every proposal, with its raw response
    assert all(c.response is not None for c in review.calls)
    assert {i.decision for i in review.items} == {"pending"}


def test_estimate_only_calls_no_model(
    work: Path, emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(work, "calibrate", "--scope", "full", "--estimate-only") == 0
    out, _ = output(capsys)
    assert "estimate (calibration cost, not system under test): KB prefix" in out
    assert "POST /v1/messages" not in emulator.stats["requests"]
    assert emulator.stats["requests"]["POST /v1/messages/count_tokens"] == 3


def test_max_cost_refuses_before_spending(
    work: Path, emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(work, "calibrate", "--scope", "full", "--max-cost", "0.0001") == 2
    _, err = output(capsys)
    assert err.startswith("error: --max-cost $0.0001: the estimate is ~$") and err.count("\n") == 1
    assert "POST /v1/messages" not in emulator.stats["requests"]


def _retrievals(tests: list[SemanticTest], picks: dict[str, list[str]]) -> list[SemanticRetrieval]:
    return [
        SemanticRetrieval(
            test_id=t.test_id,
            model="fixed",
            status="ok",
            selections=[Selection(entity_id=e, rank=i) for i, e in enumerate(picks[t.test_id], 1)],
        )
        for t in tests
    ]


def test_apply_writes_one_history_log_and_response_file_and_rescoring_moves(
    work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests, before = current(work)
    # A fixed retrieval that loads exactly what the bank expects: every test scores 100 today.
    picks = {t.test_id: [*t.expected_primary, *t.expected_secondary] for t in tests}
    scores = {r.test_id: r.score for r in score_semantic(tests, before, _retrievals(tests, picks))}
    assert set(scores.values()) == {100}

    assert run(work, "calibrate", "--scope", "full", "--apply") == 0
    out, _ = output(capsys)
    (history,) = history_files(work)
    (record,) = read_log(tmp_path / "calibration" / LOG_FILE).records
    (responses,) = (tmp_path / "calibration" / RESPONSES_DIR).glob("*.json")
    assert record.history_file == str(history) and f"applied: history {history}" in out
    assert record.response_file is not None and Path(record.response_file).resolve() == responses.resolve()

    _, after = current(work)
    changed = {t for t in after if after[t].source == f"opus_{today_utc()}"}
    assert changed and len(changed) == record.changed and record.changed + record.unchanged == len(tests)
    assert {t for t in after if after[t].source == "original"} == set(after) - changed
    rescored = {r.test_id: r.score for r in score_semantic(tests, after, _retrievals(tests, picks))}
    for test_id in changed:  # the emulator adds secondaries the fixed retrieval never loads
        assert (rescored[test_id] or 100) < 100
    assert all(rescored[t] == 100 for t in set(after) - changed)
    assert record.cost_usd > 0 and record.usage.cache_read_input_tokens > 0
    assert record.min_cache_read_coverage == 1.0


def test_batch_gives_the_same_proposals_as_sequential(
    work: Path, emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    emulator.reconfigure(batch_ready_s=0.2)
    assert run(work, "calibrate", "--scope", "full") == 0
    sequential, _ = output(capsys)
    assert run(work, "calibrate", "--scope", "full", "--batch", "--poll-seconds", "0.05") == 0
    batched, err = output(capsys)
    assert emulator.stats["requests"]["POST /v1/messages/batches"] == 1
    assert "0/8 ended" in err and "8/8 ended" in err

    def proposals(text: str) -> list[str]:
        start, end = text.index("T-RENT-001"), text.index("usage: ")
        return text[start:end].splitlines()

    assert proposals(batched) == proposals(sequential)


# --- review, then apply ------------------------------------------------------------------------------


def _dry_run(work: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, list[str]]:
    """A full dry run against the emulator: its review file and the tests whose proposal changes."""
    assert run(work, "calibrate", "--scope", "full") == 0
    output(capsys)
    (path,) = (Path("calibration") / REVIEWS_DIR).glob("review_*.json")
    return path, [i.test_id for i in read_review(path).to_review]


def test_review_accept_two_reject_one_edit_one_then_apply_without_calling_the_api(
    work: Path, emulator: EmulatorHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    path, changed = _dry_run(work, capsys)
    assert len(changed) >= 5  # the emulator keeps about a third of the expectations
    a1, a2, rejected, edited, pending = changed[:5]
    decide = ["calibrate", "--review", str(path), "--by", "Dr Lee"]
    note = "the crisis angle matters here"
    assert run(work, *decide, "--accept", a1, a2, "--reject", rejected, "--note", note) == 0
    edit = ["--edit", edited, "--primary", "repair_requests", "--secondary", "mould_and_damp"]
    assert run(work, *decide, *edit, "--note", "damp first") == 0
    out, _ = output(capsys)
    assert "2 accepted, 1 edited, 1 rejected" in out and f"--apply-from {path}" in out
    calls_before = emulator.stats["total_requests"]

    assert run(work, "calibrate", "--apply-from", str(path), "--by", "Dr Lee") == 0
    out, _ = output(capsys)
    assert emulator.stats["total_requests"] == calls_before  # applied from the file: zero API calls
    (written,) = history_files(work)
    entry = load_history(history_dir(work / "banks"), [])[0].entry
    assert {c.test_id: c.review_decision for c in entry.changes} == {
        a1: "accepted",
        a2: "accepted",
        edited: "edited",
    }
    assert entry.reviewed_by == "Dr Lee" and entry.review_id == read_review(path).review_id
    review = read_review(path)
    by_id = {i.test_id: i for i in review.items}
    (edit_change,) = [c for c in entry.changes if c.test_id == edited]
    assert edit_change.updated is not None and edit_change.updated.expected_secondary == ["mould_and_damp"]
    assert edit_change.review_note == "damp first"
    for test_id in (a1, a2):
        (change,) = [c for c in entry.changes if c.test_id == test_id]
        assert change.updated == by_id[test_id].diff.proposed
    assert by_id[rejected].decision == "rejected" and by_id[rejected].note == note
    assert by_id[pending].decision == "pending"
    assert review.applied is not None and review.applied.by == "Dr Lee"
    assert review.applied.history_file == str(written)
    _, resolved = current(work)
    assert {resolved[t].source for t in (a1, a2, edited)} == {f"opus_{today_utc()}"}
    assert resolved[rejected].source == "original" and resolved[pending].source == "original"
    (record,) = read_log(Path("calibration") / LOG_FILE).records
    assert (record.reviewed_by, record.changed, record.response_file) == ("Dr Lee", 3, str(path))
    assert record.cost_usd > 0  # the dry run's cost, logged once, when it is applied

    # Applying the same file again is refused and writes nothing.
    assert run(work, "calibrate", "--apply-from", str(path), "--by", "Dr Lee") == 2
    _, err = output(capsys)
    assert "already applied by Dr Lee" in err and err.count("\n") == 1
    assert len(history_files(work)) == 1 and len(read_log(Path("calibration") / LOG_FILE).records) == 1


def test_interactive_review_walks_pending_proposals(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, changed = _dry_run(work, capsys)
    answers = iter(["a", "r", "not this one", "e", "rent_arrears", "-", "", "-", "typed by hand", "s", "q"])
    review = walk(read_review(path), lambda _: next(answers), lambda _: None, lambda *_: None, "Dr Lee")
    decisions = {i.test_id: i.decision for i in review.to_review}
    assert [decisions[t] for t in changed[:5]] == ["accepted", "rejected", "edited", "pending", "pending"]
    edited = next(i for i in review.items if i.test_id == changed[2])
    assert edited.edited is not None and edited.edited.expected_primary == ["rent_arrears"]
    assert edited.edited.expected_secondary == [] and edited.edited.rank_check == []
    assert edited.edited.not_expected == edited.diff.proposed.not_expected  # empty answer keeps it
    assert edited.note == "typed by hand" and edited.decided_by == "Dr Lee"


def test_a_stale_review_is_refused_unless_forced(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, changed = _dry_run(work, capsys)
    assert run(work, "calibrate", "--review", str(path), "--accept-all") == 0
    output(capsys)
    kb_file = work / "kb.yaml"
    data = yaml.safe_load(kb_file.read_text())
    data["entities"][0]["content"] += "\nUpdated after the dry run."
    kb_file.write_text(yaml.safe_dump(data, sort_keys=False))
    assert run(work, "calibrate", "--apply-from", str(path), "--by", "Dr Lee") == 2
    _, err = output(capsys)
    assert "stale review: the KB changed since the dry run" in err and "--force" in err
    assert err.count("\n") == 1 and not history_files(work)
    assert run(work, "calibrate", "--apply-from", str(path), "--by", "Dr Lee", "--force") == 0
    out, _ = output(capsys)
    assert "forced over: the KB changed" in out
    assert len(load_history(history_dir(work / "banks"), [])[0].entry.changes) == len(changed)


@pytest.mark.parametrize(
    ("decisions", "message"),
    [
        (["--accept", "NOPE"], "NOPE has no proposal in this review"),
        (["--edit", "{t}"], "needs --primary"),
        (["--edit", "{t}", "--primary", "no_such_entity"], "unknown entity 'no_such_entity'"),
        (["--accept", "{t}", "--reject", "{t}"], "given more than one decision"),
    ],
)
def test_bad_review_decisions_are_one_line_and_change_nothing(
    work: Path, capsys: pytest.CaptureFixture[str], decisions: list[str], message: str
) -> None:
    path, changed = _dry_run(work, capsys)
    before = path.read_bytes()
    argv = [d.replace("{t}", changed[0]) for d in decisions]
    assert run(work, "calibrate", "--review", str(path), *argv) == 2
    _, err = output(capsys)
    # One line naming the file, test and field (an invalid edit adds the validator's problem count).
    assert message in err.splitlines()[0] and "Traceback" not in err
    assert path.read_bytes() == before


def test_apply_from_needs_a_reviewer_and_an_accepted_proposal(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = _dry_run(work, capsys)
    assert run(work, "calibrate", "--apply-from", str(path)) == 2
    assert "--apply-from needs --by NAME" in output(capsys)[1]
    assert run(work, "calibrate", "--apply-from", str(path), "--by", "Dr Lee") == 2
    assert "no accepted or edited proposal to apply" in output(capsys)[1]
    path.write_text("{}")
    assert run(work, "calibrate", "--apply-from", str(path), "--by", "Dr Lee") == 2
    assert "(not a valid review file)" in output(capsys)[1]
    assert not history_files(work)


def test_agreement_counts_review_decisions_and_overrides(
    work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, changed = _dry_run(work, capsys)
    a1, a2, rejected = changed[:3]
    assert run(work, "calibrate", "--review", str(path), "--accept", a1, a2, "--reject", rejected) == 0
    overridden = next(t for t in ("T-RENT-001", "T-LEASE-001", "T-NOISE-001") if t not in changed[:3])
    assert run(work, "override", overridden, "--primary", "rent_arrears", *BY) == 0
    output(capsys)
    report = tmp_path / "agreement.md"
    assert run(work, "agreement", "--calibration-dir", "calibration", "--report", str(report)) == 0
    out, _ = output(capsys)
    assert "agreement over 4 human decisions (2 accepted, 1 rejected, 0 edited, 1 override)" in out
    assert "Cohen's kappa" in out and "| calibrator \\ human |" in out
    assert "clinical review" in out  # the override's reasoning, beside the calibrator's
    assert report.read_text() == out.split("written: ")[0]


# --- overrides and conflicts -----------------------------------------------------------------------


def test_override_survives_a_disagreeing_calibration_until_withdrawn(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    test_id = "T-REP-001"
    assert (
        run(
            work,
            "override",
            test_id,
            "--primary",
            "repair_requests",
            "--secondary",
            "script_repair_email",
            "mould_and_damp",
            "--rank",
            "repair_requests>script_repair_email",
            "--by",
            "Dr Lee",
            "--reason",
            "damp reports need the health angle",
        )
        == 0
    )
    out, _ = output(capsys)
    assert f"now resolves to human_override_{today_utc()}" in out
    _, resolved = current(work)
    assert resolved[test_id].expectations.expected_secondary == ["script_repair_email", "mould_and_damp"]

    assert run(work, "calibrate", "--scope", "single", "--test-id", test_id, "--apply") == 0
    out, _ = output(capsys)
    assert f"CONFLICT with human_override_{today_utc()}: recorded, not applied" in out
    _, resolved = current(work)
    assert resolved[test_id].source == f"human_override_{today_utc()}"  # the override stands
    assert resolved[test_id].conflict is not None  # and the disagreement is flagged
    (record,) = read_log(Path("calibration") / LOG_FILE).records
    assert record.conflicts == [test_id]

    assert run(work, "override", test_id, "--withdraw", "--by", "Dr Lee", "--reason", "reviewed") == 0
    out, _ = output(capsys)
    assert f"now resolves to opus_{today_utc()}" in out
    _, resolved = current(work)
    assert resolved[test_id].source == f"opus_{today_utc()}" and resolved[test_id].conflict is None
    assert len(history_files(work)) == 3


def test_two_calibrations_applied_at_once_both_land(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    codes: list[int] = []
    targets = ["T-MOULD-001", "T-NOISE-001"]  # both get changed proposals from the emulator
    threads = [
        threading.Thread(
            target=lambda t=t: codes.append(
                run(work, "calibrate", "--scope", "single", "--test-id", t, "--apply")
            )
        )
        for t in targets
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    output(capsys)
    assert codes == [0, 0]
    assert len(history_files(work)) == 2
    assert len(read_log(Path("calibration") / LOG_FILE).records) == 2
    assert len(list((Path("calibration") / RESPONSES_DIR).glob("*.json"))) == 2
    _, resolved = current(work)
    assert {resolved[t].source for t in targets} == {f"opus_{today_utc()}"}


def test_affected_scope_lists_why_each_test_is_in(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(
        work, "calibrate", "--scope", "affected", "--added-entity", "deposit_return", "--estimate-only"
    )
    assert code == 0
    out, _ = output(capsys)
    assert "3 of 8 semantic tests" in out
    assert "T-DEP-001: expectations name deposit_return; topic money" in out


# --- bad input: one line, exit 2 -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["calibrate", "--scope", "single", "--test-id", "NOPE"], "unknown: NOPE"),
        (["calibrate", "--scope", "affected"], "the affected scope needs KB entity ids"),
        (["calibrate", "--scope", "full", "--kb-version", "v9"], "is version tenant-fixture-1"),
        (["calibrate", "--scope", "full", "--model", "claude-unknown-1"], "no price known"),
        (["override", "T-REP-001", "--withdraw", *BY], "no standing override"),
        (
            ["override", "T-REP-001", "--primary", "x", "--rank", "a-b", "--by", "a", "--reason", "b"],
            "HIGHER>LOWER",
        ),
        (
            ["override", "NOPE", "--primary", "rent_arrears", "--by", "a", "--reason", "b"],
            "not in the semantic",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    work: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert run(work, *argv) == 2
    _, err = output(capsys)
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_missing_key_is_one_line_and_exit_2(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert run(work, "calibrate", "--scope", "full") == 2
    _, err = output(capsys)
    assert err == "error: calibration calls the Anthropic API: set ANTHROPIC_API_KEY in the environment\n"


def test_override_naming_a_non_semantic_entity_is_rejected_like_a_bank(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["override", "T-REP-001", "--primary", "handler_crisis", "--not-expected", "no_such", "--by", "a"]
    assert run(work, *argv, "--reason", "b") == 2
    _, err = output(capsys)
    assert "human_override.expected_primary: entity 'handler_crisis' is PATTERN" in err
    assert "human_override.not_expected: unknown entity 'no_such'" in err
    assert not history_files(work)
