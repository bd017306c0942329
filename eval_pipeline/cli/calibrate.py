"""`calibrate`: expectations proposed by Claude, reviewed and applied to the history. A dry run
(unless `--apply`) keeps the proposals in a review file (cli/calibration_review.py), so what was
paid for can be applied later without paying again."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.calibration_review import (
    add_review_arguments,
    cmd_apply_from,
    cmd_review,
    review_flags_used,
)
from eval_pipeline.cli.exit_status import EXIT_ERROR, EXIT_OK, UsageError
from eval_pipeline.cli.expectations import diff_lines, expectation_args, semantic_tests_of
from eval_pipeline.cli.flags import add_flags, check_number, path_arg, results_dir

if TYPE_CHECKING:  # the SDK and the models are imported only by the commands that use them
    from eval_pipeline.core.calibration.records import CalibrationRun
    from eval_pipeline.providers.calibration_session import CalibrationPlan


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate",
        help="propose expectations with Claude (dry run unless --apply)",
        description="Ask Claude to propose each semantic test's expectations. Prints the cost "
        "estimate first; a dry run shows the proposals and keeps them in a review file, --apply "
        "also writes a new expectation history file. --review and --apply-from decide and apply "
        "a dry run's proposals without calling the API again.",
    )
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
        "--review", type=path_arg, metavar="FILE", help="decide a dry run's proposals (no API call)"
    )
    mode.add_argument(
        "--apply-from",
        type=path_arg,
        metavar="FILE",
        help="write a review's accepted proposals (no API call)",
    )
    p.add_argument("--batch", action="store_true", help="use the Message Batches API (half price, slower)")
    p.add_argument("--model", help="calibrator model id (default: the newest Opus in the pinned SDK)")
    p.add_argument("--max-cost", type=float, help="do not start when the typical estimate exceeds this (USD)")
    p.add_argument("--rate-per-min", type=float, default=48.0, help="calibrator requests per minute [48]")
    p.add_argument("--concurrency", type=int, default=4, help="calibrator requests in flight at once [4]")
    p.add_argument("--poll-seconds", type=float, default=10.0, help="batch status polling interval [10]")
    add_flags(p, "--calibration-dir", "--results-dir")
    add_review_arguments(p)
    expectation_args(p)
    add_flags(p, "--kb", "--banks-dir")


def _retrieved(args: argparse.Namespace) -> dict[str, set[str]]:
    """Entities each test's latest retrieval saw (the affected scope only reads results)."""
    from eval_pipeline.core.calibration.files import latest_documents
    from eval_pipeline.core.calibration.scope import retrieved_entities

    if args.scope != "affected":
        return {}
    docs, unreadable = latest_documents(results_dir(args))
    for path in unreadable:
        print(f"warning: {path} could not be read; its retrievals are not used", file=sys.stderr)
    return retrieved_entities(docs)


def cmd_calibrate(args: argparse.Namespace) -> int:
    import asyncio

    from eval_pipeline.core.calibration.prompt import PROMPT_VERSION
    from eval_pipeline.core.control_chars import one_line
    from eval_pipeline.core.inputs.loading import history_dir
    from eval_pipeline.core.inputs.validation import load_validated
    from eval_pipeline.core.writable import require_writable
    from eval_pipeline.providers.calibration_session import plan_calibration
    from eval_pipeline.providers.calibrator import DEFAULT_MODEL, api_key_from_env

    if args.review is not None:
        return cmd_review(args)
    if args.apply_from is not None:
        return cmd_apply_from(args)
    if args.scope is None:
        raise UsageError("calibrate needs --scope (or --review FILE / --apply-from FILE)")
    if review_flags_used(args) or args.primary or args.secondary or args.not_expected or args.rank:
        raise UsageError("review decisions go with --review FILE")

    check_number("--rate-per-min", args.rate_per_min, above=0)
    check_number("--poll-seconds", args.poll_seconds, above=0)
    check_number("--max-cost", args.max_cost, low=0)
    if args.concurrency < 1:
        raise UsageError("--concurrency: must be at least 1")
    kb, banks = load_validated(args.kb, args.banks_dir)
    if args.kb_version is not None and args.kb_version != kb.kb_version:
        raise UsageError(f"--kb-version {args.kb_version}: the KB at {args.kb} is version {kb.kb_version}")
    tests = semantic_tests_of(banks)
    # A scope, calibrator or price problem is one line, exit 2 (cli.main)
    plan = plan_calibration(
        kb,
        tests,
        banks.history,
        scope=args.scope,
        test_ids=args.test_ids,
        added_entities=args.added_entities,
        retrieved=_retrieved(args),
        model=args.model or DEFAULT_MODEL,
        batch=args.batch,
    )
    key = api_key_from_env()
    print(
        f"calibrate: scope {args.scope}, {len(plan.tests)} of {len(tests)} semantic tests, "
        f"model {plan.model} ({PROMPT_VERSION}), KB {one_line(kb.kb_version)} ({kb.content_hash[:12]}), "
        f"{'batch' if args.batch else 'sequential'}"
    )
    for test_id, reasons in plan.why.items():
        print(f"  {test_id}: {'; '.join(reasons)}")
    if not plan.tests:
        print("no tests in scope: nothing to calibrate")
        return EXIT_OK
    if not args.estimate_only:  # where the proposals go, checked before the first API call
        folders = [("calibration folder", args.calibration_dir)]
        if args.apply:
            folders.append(("history folder", history_dir(args.banks_dir)))
        require_writable(folders)
    return asyncio.run(_session(args, plan, key))


async def _session(args: argparse.Namespace, plan: CalibrationPlan, key: str) -> int:
    """Estimate, call, show, and keep (apply, or a review file for a dry run)."""
    from eval_pipeline.providers.base import ProviderError
    from eval_pipeline.providers.calibration_session import CalibrationSession
    from eval_pipeline.providers.ratelimit import RateLimiter

    limiter = RateLimiter(args.rate_per_min, args.concurrency)
    session = CalibrationSession(plan, key, limiter, args.poll_seconds)
    try:
        count, estimate = await session.estimate()
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
        run = await session.run(_progress, _batch_progress)
    except ProviderError as exc:
        print(f"error: calibrator API: {exc}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        await session.aclose()
    show_run(run)
    _keep(args, run, plan)
    return EXIT_ERROR if run.count("errored") else EXIT_OK


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty():
        print(f"\r  calibrating {done}/{total}", end="" if done < total else "\n", file=sys.stderr)


def _batch_progress(batch_id: str, ended: int, total: int) -> None:
    print(f"  batch {batch_id}: {ended}/{total} ended", file=sys.stderr, flush=True)


def _keep(args: argparse.Namespace, run: CalibrationRun, plan: CalibrationPlan) -> None:
    from eval_pipeline.providers.calibration_session import keep

    kept = keep(run, plan, args.apply, args.banks_dir, args.calibration_dir)
    if args.apply:
        print(f"applied: history {kept.history or '(none: no valid proposal)'}")
        print(f"         responses {kept.responses}\n         log {kept.log}")
    elif kept.review is not None:
        print(
            f"dry run: history untouched; proposals kept for review in {kept.review}\n"
            f"  review: eval-pipeline calibrate --review {kept.review}  (no API call)\n"
            f"  apply:  eval-pipeline calibrate --apply-from {kept.review} --by NAME"
        )
    else:
        print("dry run: no valid proposal, nothing to review")


def show_run(run: CalibrationRun) -> None:
    """Every test's previous -> proposed expectations, then counts, usage, cost and cache reads."""
    from eval_pipeline.core.control_chars import one_line

    by_id = {d.test_id: d for d in run.diffs}
    for o in run.outcomes:
        d = by_id.get(o.test_id)
        if d is None:
            print(one_line(f"{o.test_id}  {o.status.upper()}: {o.reason}"))  # the reason may be the model's
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
