"""`calibrate` and `override`: expectations proposed by Claude, or decided by a clinician.

`calibrate` is a dry run unless `--apply`: it prints the cost estimate (free token counting), then
asks the model and shows every test's previous -> proposed expectations, writes no history and
keeps the proposals in a review file (`--review` / `--apply-from`, commands_review.py), so what was
paid for can be applied later without paying again. `--estimate-only` stops after the estimate and
`--max-cost` refuses to start above a budget. `--apply` does the same and then writes one history
file, one raw-response file and one log record.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval_pipeline.cli_errors import EXIT_ERROR, EXIT_OK, UsageError
from eval_pipeline.core.banks import Expectations, RankCheck, SemanticTest
from eval_pipeline.core.calibration import (
    DEFAULT_TRIGGERS,
    PROMPT_VERSION,
    CalibrationRun,
    CallRecord,
    ProposalDiff,
    ScopeError,
    retrieved_entities,
    scoped_tests,
    user_turn,
)
from eval_pipeline.core.calibration_files import (
    CalibrationFileError,
    apply_calibration,
    latest_documents,
)
from eval_pipeline.core.calibration_review import review_from_run, write_review
from eval_pipeline.core.expectations import LoadedHistory, ResolvedExpectation, resolve
from eval_pipeline.core.history import HistoryChange, HistoryFile, HumanOverride, append_history, now_utc
from eval_pipeline.core.kb import KnowledgeBase
from eval_pipeline.core.loading import Banks, InputError, history_dir, load_history
from eval_pipeline.core.validation import cross_check, load_validated
from eval_pipeline.providers.pricing import Price


def _data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kb", type=Path, default=Path("kb"), help="KB directory or single file")
    p.add_argument("--banks-dir", type=Path, default=Path("test_banks"))


def _expectation_args(p: argparse.ArgumentParser) -> None:
    """Expectations typed by a human: an override, or a review's --edit."""
    ids: dict[str, Any] = {"nargs": "+", "action": "extend", "default": [], "metavar": "ENTITY"}
    p.add_argument("--primary", **ids)
    p.add_argument("--secondary", **ids)
    p.add_argument("--not-expected", **ids)
    p.add_argument("--rank", nargs="+", action="extend", default=[], metavar="HIGHER>LOWER")


def add_calibrate_commands(sub: Any) -> None:
    # commands_review builds on this module's helpers, so it is imported where it is used.
    from eval_pipeline.commands_agreement import add_agreement_commands
    from eval_pipeline.commands_review import add_review_arguments

    p = sub.add_parser("calibrate", help="propose expectations with Claude (dry run unless --apply)")
    p.add_argument("--scope", choices=("full", "affected", "single"), help="required unless reviewing")
    p.add_argument("--test-id", action="append", default=[], dest="test_ids", help="single scope (repeat)")
    p.add_argument(
        "--added-entity", action="append", default=[], dest="added_entities", help="affected scope (repeat)"
    )
    p.add_argument("--kb-version", help="refuse to run unless the KB's version label is this")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show proposals, write nothing (default)")
    mode.add_argument("--apply", action="store_true", help="write the history file, responses and log")
    mode.add_argument("--estimate-only", action="store_true", help="print the cost estimate, call nothing")
    mode.add_argument(
        "--review", type=Path, metavar="FILE", help="decide a dry run's proposals (no API call)"
    )
    mode.add_argument(
        "--apply-from", type=Path, metavar="FILE", help="write a review's accepted proposals (no API call)"
    )
    p.add_argument("--batch", action="store_true", help="use the Message Batches API (half price, slower)")
    p.add_argument("--model", help="calibrator model id (default: the newest Opus in the pinned SDK)")
    p.add_argument("--max-cost", type=float, help="do not start when the typical estimate exceeds this (USD)")
    p.add_argument("--rate-per-min", type=float, default=48.0, help="calibrator requests per minute [48]")
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--poll-seconds", type=float, default=10.0, help="batch status polling interval [10]")
    p.add_argument("--calibration-dir", type=Path, default=Path("calibration"))
    p.add_argument("--results-dir", type=Path, default=Path("results"), help="last retrievals (affected)")
    add_review_arguments(p)
    _expectation_args(p)
    _data_args(p)
    p.set_defaults(func=cmd_calibrate)

    o = sub.add_parser("override", help="record (or --withdraw) a human override of a test's expectations")
    o.add_argument("test_id")
    _expectation_args(o)
    o.add_argument("--withdraw", action="store_true", help="end the standing override")
    o.add_argument("--by", required=True, help="who decides (recorded)")
    o.add_argument("--reason", required=True, help="why (recorded)")
    _data_args(o)
    o.set_defaults(func=cmd_override)
    add_agreement_commands(sub)  # judges calibrations against these overrides and reviews


# --- calibrate -----------------------------------------------------------------------------------


def semantic_tests_of(banks: Banks) -> list[SemanticTest]:
    if banks.semantic is None:
        raise UsageError(f"{banks.root}: no semantic bank to calibrate")
    return banks.semantic.tests


def _retrieved(args: argparse.Namespace) -> dict[str, set[str]]:
    """Entities each test's latest retrieval saw (the affected scope only reads results)."""
    if args.scope != "affected":
        return {}
    docs, unreadable = latest_documents(args.results_dir)
    for path in unreadable:
        print(f"warning: {path} could not be read; its retrievals are not used", file=sys.stderr)
    return retrieved_entities(docs)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from eval_pipeline.commands_review import cmd_apply_from, cmd_review, review_flags_used
    from eval_pipeline.providers.calibrator import (
        DEFAULT_MODEL,
        CalibratorConfigError,
        api_key_from_env,
        calibrator_price,
    )

    if args.review is not None:
        return cmd_review(args)
    if args.apply_from is not None:
        return cmd_apply_from(args)
    if args.scope is None:
        raise UsageError("calibrate needs --scope (or --review FILE / --apply-from FILE)")
    if review_flags_used(args) or args.primary or args.secondary or args.not_expected or args.rank:
        raise UsageError("review decisions go with --review FILE")

    if args.rate_per_min <= 0 or args.concurrency < 1 or args.poll_seconds <= 0:
        raise UsageError("--rate-per-min and --poll-seconds must be positive, --concurrency at least 1")
    kb, banks = load_validated(args.kb, args.banks_dir)
    if args.kb_version is not None and args.kb_version != kb.kb_version:
        raise UsageError(f"--kb-version {args.kb_version}: the KB at {args.kb} is version {kb.kb_version}")
    tests = semantic_tests_of(banks)
    resolved = resolve(tests, banks.history)
    try:
        chosen, why = scoped_tests(
            args.scope, tests, kb, resolved, args.test_ids, args.added_entities, _retrieved(args)
        )
        key = api_key_from_env()
    except (ScopeError, CalibratorConfigError) as exc:
        raise UsageError(str(exc)) from None
    model = args.model or DEFAULT_MODEL
    price = calibrator_price(model)  # PricingError: one line, exit 2 (cli.main)
    print(
        f"calibrate: scope {args.scope}, {len(chosen)} of {len(tests)} semantic tests, model {model} "
        f"({PROMPT_VERSION}), KB {kb.kb_version} ({kb.content_hash[:12]}), "
        f"{'batch' if args.batch else 'sequential'}"
    )
    for test_id, reasons in why.items():
        print(f"  {test_id}: {'; '.join(reasons)}")
    if not chosen:
        print("no tests in scope: nothing to calibrate")
        return EXIT_OK
    session = _Session(args, kb, tests, chosen, resolved, model, key, price)
    return asyncio.run(session.run())


class _Session:
    """One calibrate invocation: estimate, call, show, and (with --apply) write."""

    def __init__(
        self,
        args: argparse.Namespace,
        kb: KnowledgeBase,
        bank: list[SemanticTest],
        tests: list[SemanticTest],
        resolved: dict[str, ResolvedExpectation],
        model: str,
        key: str,
        price: Price,
    ) -> None:
        """`bank` is every semantic test (a review file fingerprints it), `tests` the scope."""
        from eval_pipeline.providers.calibrator import Calibrator, TestPrompt
        from eval_pipeline.providers.ratelimit import RateLimiter

        self.args, self.kb, self.bank, self.resolved, self.price = args, kb, bank, resolved, price
        self.prompts = [TestPrompt(t.test_id, user_turn(t, resolved[t.test_id])) for t in tests]
        limiter = RateLimiter(args.rate_per_min, args.concurrency)
        self.calibrator = Calibrator(model, key, limiter, poll_interval_s=args.poll_seconds)

    async def run(self) -> int:
        from eval_pipeline.providers.base import ProviderError

        try:
            return await self._run()
        except ProviderError as exc:
            print(f"error: calibrator API: {exc}", file=sys.stderr)
            return EXIT_ERROR
        finally:
            await self.calibrator.aclose()

    async def _run(self) -> int:
        from eval_pipeline.providers.calibrator import estimate_cost, finish_run

        args = self.args
        count = await self.calibrator.count(self.kb, self.prompts)
        estimate = estimate_cost(count, self.price, args.batch)
        print(
            f"estimate (calibration cost, not system under test): KB prefix {count.prefix_tokens:,} tokens "
            f"(cached: written once, read {count.tests - 1}x), test turns {count.turn_tokens:,} tokens; "
            f"input ${estimate.input_usd:.4f} + output ~${estimate.output_typical_usd:.4f} "
            f"= ~${estimate.typical_usd:.4f} (at most ${estimate.max_usd:.4f})"
        )
        if args.estimate_only:
            return EXIT_OK
        if args.max_cost is not None and estimate.typical_usd > args.max_cost:
            raise UsageError(f"--max-cost ${args.max_cost:.4f}: the estimate is ~${estimate.typical_usd:.4f}")
        started, clock = now_utc(), time.monotonic()
        calls = await self._calls()
        run = finish_run(
            scope=args.scope,
            trigger=DEFAULT_TRIGGERS[args.scope],
            added_entities=args.added_entities,
            model=self.calibrator.model_id,
            batch=args.batch,
            kb=self.kb,
            resolved=self.resolved,
            started=started,
            started_clock=clock,
            prefix_tokens=count.prefix_tokens,
            calls=calls,
            price=self.price,
        )
        show_run(run)
        if args.apply:
            _apply(args, run)
        elif run.diffs:
            path = write_review(args.calibration_dir, review_from_run(run, self.bank))
            print(
                f"dry run: history untouched; proposals kept for review in {path}\n"
                f"  review: eval-pipeline calibrate --review {path}  (no API call)\n"
                f"  apply:  eval-pipeline calibrate --apply-from {path} --by NAME"
            )
        else:
            print("dry run: no valid proposal, nothing to review")
        return EXIT_ERROR if run.count("errored") else EXIT_OK

    async def _calls(self) -> list[CallRecord]:
        tty = sys.stderr.isatty()

        def progress(done: int, total: int) -> None:
            if tty:
                print(f"\r  calibrating {done}/{total}", end="" if done < total else "\n", file=sys.stderr)

        def batch_progress(batch_id: str, ended: int, total: int) -> None:
            print(f"  batch {batch_id}: {ended}/{total} ended", file=sys.stderr, flush=True)

        if self.args.batch:
            return await self.calibrator.calibrate_batch(self.kb, self.prompts, batch_progress)
        return await self.calibrator.calibrate(self.kb, self.prompts, progress)


def _apply(args: argparse.Namespace, run: CalibrationRun) -> None:
    try:
        written = apply_calibration(history_dir(args.banks_dir), args.calibration_dir, run)
    except CalibrationFileError as exc:
        raise UsageError(str(exc)) from None
    print(f"applied: history {written.history or '(none: no valid proposal)'}")
    print(f"         responses {written.responses}\n         log {written.log}")


def _ids(values: Sequence[str]) -> str:
    return ", ".join(values) or "-"


def _ranks(checks: Sequence[RankCheck]) -> str:
    return ", ".join(f"{rc.higher}>{rc.lower}" for rc in checks) or "-"


def diff_lines(d: ProposalDiff) -> list[str]:
    rows = [
        ("primary", _ids(d.previous.expected_primary), _ids(d.proposed.expected_primary)),
        ("secondary", _ids(d.previous.expected_secondary), _ids(d.proposed.expected_secondary)),
        ("not expected", _ids(d.previous.not_expected), _ids(d.proposed.not_expected)),
        ("rank", _ranks(d.previous.rank_check), _ranks(d.proposed.rank_check)),
    ]
    lines = [f"    {name:13} {old}" + (f" -> {new}" if new != old else "") for name, old, new in rows]
    return [*lines, f"    {'reasoning':13} {d.reasoning}"]


def show_run(run: CalibrationRun) -> None:
    """Every test's previous -> proposed expectations, then counts, usage, cost and cache reads."""
    by_id = {d.test_id: d for d in run.diffs}
    for o in run.outcomes:
        d = by_id.get(o.test_id)
        if d is None:
            print(f"{o.test_id}  {o.status.upper()}: {o.reason}")
        elif d.clears_conflict:
            print(f"{o.test_id}  agrees with {d.previous_source}: clears its calibration conflict")
        elif not d.changed:
            print(f"{o.test_id}  unchanged ({d.previous_source})")
        else:
            note = f"CONFLICT with {d.previous_source}: recorded, not applied" if d.conflict else "changed"
            print(f"{o.test_id}  {note} (was {d.previous_source})")
            print("\n".join(diff_lines(d)))
    changed, conflicts = len(run.changed), sum(d.conflict for d in run.diffs)
    print(
        f"summary: {changed} changed ({conflicts} in conflict with a standing override), "
        f"{len(run.diffs) - changed} unchanged, "
        f"{run.count('rejected')} rejected, {run.count('errored')} errored"
    )
    u = run.usage
    print(
        f"usage: input {u.input_tokens:,}, cache write {u.cache_creation_input_tokens:,}, "
        f"cache read {u.cache_read_input_tokens:,}, output {u.output_tokens:,} tokens; "
        f"calibration cost ${run.cost_usd:.4f} (not part of any system-under-test cost)"
    )
    if run.coverage:
        least = min(run.coverage)
        print(f"cache: from the 2nd call on, reads covered at least {least:.0%} of the KB prefix")


# --- override ------------------------------------------------------------------------------------


def parse_rank(text: str) -> RankCheck:
    higher, sep, lower = text.partition(">")
    if not sep or not higher.strip() or not lower.strip() or ">" in lower:
        raise UsageError(f"--rank: '{text}' is not HIGHER>LOWER")
    return RankCheck(higher=higher.strip(), lower=lower.strip())


def _override(args: argparse.Namespace, current: ResolvedExpectation) -> HumanOverride:
    today = now_utc().date().isoformat()
    if args.withdraw:
        if args.primary or args.secondary or args.not_expected or args.rank:
            raise UsageError("--withdraw takes no expectations")
        if current.source_kind != "human_override":
            raise UsageError(
                f"{args.test_id} has no standing override to withdraw (source: {current.source})"
            )
        return HumanOverride(override_date=today, by=args.by, reason=args.reason, withdraw=True)
    if not args.primary:
        raise UsageError("an override needs --primary (or --withdraw)")
    if not args.by.strip() or not args.reason.strip():
        raise UsageError("--by and --reason must not be empty")
    return HumanOverride(
        expected_primary=args.primary,
        expected_secondary=args.secondary,
        not_expected=args.not_expected,
        rank_check=[parse_rank(r).model_dump() for r in args.rank],
        override_date=today,
        by=args.by.strip(),
        reason=args.reason.strip(),
    )


def validate_entry(kb: KnowledgeBase, kb_path: Path, banks: Banks, entry: HistoryFile, label: str) -> None:
    """A human's expectations get the same cross-checks as bank expectations (the loaded banks
    are already clean); `label` names the entry in the problems."""
    candidate = LoadedHistory(path=Path(label), entry=entry)
    problems = cross_check(kb, kb_path, banks.model_copy(update={"history": [candidate]}))
    if problems:
        raise InputError(problems)


def cmd_override(args: argparse.Namespace) -> int:
    kb, banks = load_validated(args.kb, args.banks_dir)
    tests = semantic_tests_of(banks)
    if args.test_id not in {t.test_id for t in tests}:
        raise UsageError(f"{args.test_id} is not in the semantic bank")
    current = resolve(tests, banks.history)[args.test_id]
    override = _override(args, current)
    entry = HistoryFile(
        version=now_utc(),
        calibration_trigger="human_override_withdrawn" if override.withdraw else "human_override",
        kb_version=kb.kb_version,
        kb_hash=kb.content_hash,
        changes=[HistoryChange(test_id=args.test_id, previous=current.expectations, human_override=override)],
        changed_count=1,
    )
    validate_entry(kb, args.kb, banks, entry, "override")
    history = history_dir(args.banks_dir)
    path = append_history(history, entry)
    now = resolve(tests, load_history(history, []))[args.test_id]
    verb = "withdrawn" if override.withdraw else "recorded"
    print(f"override {verb} for {args.test_id} by {override.by}: {override.reason}")
    if not override.withdraw:
        print("\n".join(expectation_lines(override.expectations())))
    print(f"  was {current.source}; now resolves to {now.source}\n  written: {path}")
    return EXIT_OK


def expectation_lines(exp: Expectations) -> list[str]:
    return [
        f"    primary       {_ids(exp.expected_primary)}",
        f"    secondary     {_ids(exp.expected_secondary)}",
        f"    not expected  {_ids(exp.not_expected)}",
        f"    rank          {_ranks(exp.rank_check)}",
    ]
