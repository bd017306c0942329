"""`calibrate --review FILE` and `--apply-from FILE`: a human between proposal and history.
`--review` records decisions, per test on a terminal or by flags for scripts; `--apply-from` writes
the accepted and edited proposals as one history file, once, without calling the API."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.cli.exit_status import EXIT_OK, UsageError
from eval_pipeline.cli.expectations import (
    diff_lines,
    expectation_lines,
    parse_rank,
    semantic_tests_of,
    validate_entry,
)
from eval_pipeline.cli.flags import listed
from eval_pipeline.core.control_chars import one_line

if TYPE_CHECKING:  # `calibrate`'s parser imports this module: the models load with a review
    from eval_pipeline.core.calibration.review import AppliedReview, ReviewFile, ReviewItem
    from eval_pipeline.core.inputs.banks import Expectations

Ask = Callable[[str], str]
Say = Callable[[str], None]
Check = Callable[[str, "Expectations"], None]  # raises InputError when a human's edit is invalid


def add_review_arguments(p: argparse.ArgumentParser) -> None:
    r = p.add_argument_group("review (with --review FILE; --by and --force also with --apply-from)")
    r.add_argument("--accept-all", action="store_true", help="accept every proposal not otherwise decided")
    r.add_argument("--accept", **listed("TEST"), help="accept these proposals")
    r.add_argument("--reject", **listed("TEST"), help="reject these proposals")
    r.add_argument("--edit", metavar="TEST", help="replace TEST's proposal with --primary/--secondary/...")
    r.add_argument("--note", help="why (recorded with --reject / --edit)")
    r.add_argument("--by", help="who decides (recorded; required with --apply-from)")
    r.add_argument("--force", action="store_true", help="apply a review although the KB or bank changed")


def _scripted(args: argparse.Namespace) -> bool:
    return bool(args.accept_all or args.accept or args.reject or args.edit)


def review_flags_used(args: argparse.Namespace) -> bool:
    return bool(_scripted(args) or args.note or args.by or args.force)


def _already_applied(path: Path, applied: AppliedReview) -> UsageError:
    return UsageError(
        f"{path}: already applied by {applied.by} at {applied.applied_at.isoformat()} "
        f"({applied.history_file}); nothing written"
    )


def _checker(args: argparse.Namespace, path: Path) -> Check:
    """Validates an edit like an override: known SEMANTIC entities, no entity in two lists."""
    from eval_pipeline.core.dates import now_utc
    from eval_pipeline.core.inputs.history_file import HistoryChange, HistoryFile
    from eval_pipeline.core.inputs.validation import load_validated

    kb, banks = load_validated(args.kb, args.banks_dir)

    def check(test_id: str, expectations: Expectations) -> None:
        entry = HistoryFile(
            version=now_utc(),
            calibration_trigger="manual",
            changes=[HistoryChange(test_id=test_id, updated=expectations)],
        )
        validate_entry(kb, args.kb, banks, entry, f"{path} --edit {test_id}")

    return check


def _edited(args: argparse.Namespace) -> Expectations:
    from eval_pipeline.core.inputs.banks import Expectations

    if not args.primary:
        raise UsageError(
            f"--edit {args.edit} needs --primary (and optionally --secondary/--not-expected/--rank)"
        )
    return Expectations(
        expected_primary=args.primary,
        expected_secondary=args.secondary,
        not_expected=args.not_expected,
        rank_check=[parse_rank(r) for r in args.rank],
    )


def _scripted_decisions(args: argparse.Namespace, review: ReviewFile, check: Check) -> ReviewFile:
    from eval_pipeline.core.calibration.review import decide

    named = [*args.accept, *args.reject, *([args.edit] if args.edit else [])]
    twice = sorted({t for t in named if named.count(t) > 1})
    if twice:
        raise UsageError(f"{args.review}: {', '.join(twice)} given more than one decision")
    by, note = args.by, args.note
    for test_id in args.reject:
        review = decide(review, test_id, "rejected", note=note, by=by)
    for test_id in args.accept:
        review = decide(review, test_id, "accepted", by=by)
    if args.edit:
        edited = _edited(args)
        review.item(args.edit)  # an unknown test is named before its edit is validated
        check(args.edit, edited)
        review = decide(review, args.edit, "edited", edited=edited, note=note, by=by)
    if args.accept_all:
        for item in review.to_review:
            if item.test_id not in named:
                review = decide(review, item.test_id, "accepted", by=by)
    return review


def _item_lines(item: ReviewItem) -> list[str]:
    d = item.diff
    if d.conflict:
        what = f"CONFLICT with {d.previous_source}: accepting records it, the override stands"
    elif d.clears_conflict:
        what = f"agrees with {d.previous_source}: accepting clears its conflict"
    else:
        what = f"changed (was {d.previous_source})"
    lines = [f"{item.test_id}  [{item.decision}]  {what}", *diff_lines(d)]
    if item.edited is not None:
        lines += ["    edited to:", *expectation_lines(item.edited)]
    if item.note:
        lines.append(f"    {'note':13} {item.note}")
    return [one_line(line) for line in lines]  # a note or the model's reasoning stays in its line


def _ask_edit(item: ReviewItem, ask: Ask) -> Expectations:
    """Each list typed anew; an empty answer keeps the proposal's list."""
    from eval_pipeline.core.inputs.banks import Expectations

    proposed = item.diff.proposed
    values: dict[str, object] = {}
    for name in ("expected_primary", "expected_secondary", "not_expected"):
        current = getattr(proposed, name)
        answer = ask(f"  {name} [{' '.join(current) or '-'}] (ids, '-' for none): ").strip()
        values[name] = current if not answer else [] if answer == "-" else answer.replace(",", " ").split()
    ranks = " ".join(f"{rc.higher}>{rc.lower}" for rc in proposed.rank_check)
    answer = ask(f"  rank_check [{ranks or '-'}] (HIGHER>LOWER ..., '-' for none): ").strip()
    checks = [] if answer == "-" else [parse_rank(r) for r in answer.split()]
    return Expectations.model_validate({**values, "rank_check": checks if answer else proposed.rank_check})


def walk(review: ReviewFile, ask: Ask, say: Say, check: Check, by: str | None) -> ReviewFile:
    """Every pending proposal on a terminal: accept, reject, edit, skip, or quit (keeps the rest)."""
    from eval_pipeline.core.calibration.review import decide

    pending = [i for i in review.to_review if i.decision == "pending"]
    for n, item in enumerate(pending, 1):
        say(f"\n({n}/{len(pending)}) " + "\n".join(_item_lines(item)))
        while True:
            try:
                choice = ask("[a]ccept, [r]eject, [e]dit, [s]kip, [q]uit? ").strip().lower()[:1]
            except EOFError:  # Ctrl-D quits like `q`, keeping the decisions made so far
                return review
            if choice == "q":
                return review
            if choice == "s":
                break
            if choice == "a":
                review = decide(review, item.test_id, "accepted", by=by)
                break
            if choice == "r":
                note = ask("  why (optional): ").strip() or None
                review = decide(review, item.test_id, "rejected", note=note, by=by)
                break
            if choice == "e":
                try:
                    edited = _ask_edit(item, ask)
                    check(item.test_id, edited)
                except (UsageError, ValueError) as exc:  # InputError and pydantic's errors are ValueErrors
                    say(f"  not recorded: {exc}")
                    continue
                note = ask("  why (optional): ").strip() or None
                review = decide(review, item.test_id, "edited", edited=edited, note=note, by=by)
                break
    return review


def cmd_review(args: argparse.Namespace) -> int:
    from eval_pipeline.core.calibration.review import ReviewError, read_review, review_lock, save_review

    path: Path = args.review
    with review_lock(path):
        review = read_review(path)
        if review.applied is not None and _scripted(args):
            raise _already_applied(path, review.applied)
        before = review
        try:
            if _scripted(args):
                review = _scripted_decisions(args, review, _checker(args, path))
            elif sys.stdin.isatty() and review.applied is None:
                review = walk(review, input, print, _checker(args, path), args.by)
        except ReviewError as exc:
            raise UsageError(f"{path}: {exc}") from None
        if review != before:
            save_review(path, review)
    for item in review.to_review:
        print("\n".join(_item_lines(item)))
    counts = ", ".join(f"{review.count(d)} {d}" for d in ("accepted", "edited", "rejected", "pending"))
    to_decide, unchanged = len(review.to_review), len(review.items) - len(review.to_review)
    print(f"review {review.review_id}: {to_decide} proposals to decide ({counts}); {unchanged} unchanged")
    if review.applied is not None:
        print(one_line(f"applied by {review.applied.by} at {review.applied.applied_at.isoformat()}"))
    elif review.count("accepted") + review.count("edited"):
        print(f"next: eval-pipeline calibrate --apply-from {path} --by NAME")
    return EXIT_OK


def cmd_apply_from(args: argparse.Namespace) -> int:
    from eval_pipeline.core.calibration.files import LOG_FILE, append_log
    from eval_pipeline.core.calibration.review import (
        AppliedReview,
        ReviewError,
        bank_hash,
        read_review,
        review_lock,
        reviewed_history,
        save_review,
        stale_reasons,
    )
    from eval_pipeline.core.dates import now_utc
    from eval_pipeline.core.expectations.resolution import resolve
    from eval_pipeline.core.inputs.history_file import append_history
    from eval_pipeline.core.inputs.loading import history_dir, load_history
    from eval_pipeline.core.inputs.validation import load_validated

    path: Path = args.apply_from
    by = (args.by or "").strip()
    if not by:
        raise UsageError("--apply-from needs --by NAME (the reviewer, recorded in the history file)")
    if _scripted(args):
        raise UsageError("decide with --review FILE first; --apply-from only writes what was decided")
    kb, banks = load_validated(args.kb, args.banks_dir)
    tests = semantic_tests_of(banks)
    history = history_dir(args.banks_dir)
    with review_lock(path):
        review = read_review(path)
        if review.applied is not None:
            raise _already_applied(path, review.applied)
        earlier = next((h.path for h in banks.history if h.entry.review_id == review.review_id), None)
        if earlier is not None:
            raise UsageError(f"{path}: already applied ({earlier}); nothing written")
        stale = stale_reasons(review, kb.content_hash, bank_hash(tests))
        if stale and not args.force:
            raise UsageError(f"{path}: stale review: {'; '.join(stale)}; run a new dry run, or pass --force")
        try:
            entry = reviewed_history(review, by=by, version=now_utc())
        except ReviewError as exc:
            raise UsageError(f"{path}: {exc}") from None
        validate_entry(kb, args.kb, banks, entry, str(path))
        written = append_history(history, entry)
        applied = AppliedReview(applied_at=entry.version, by=by, history_file=str(written))
        save_review(path, review.model_copy(update={"applied": applied}))
    applied_ids = {c.test_id for c in entry.changes}
    conflicts = [i.test_id for i in review.to_review if i.test_id in applied_ids and i.diff.conflict]
    record = review.record.model_copy(
        update={
            "changed": len(entry.changes),
            "unchanged": entry.unchanged_count,
            "conflicts": conflicts,
            "history_file": str(written),
            "response_file": str(path),
            "reviewed_by": by,
        }
    )
    append_log(args.calibration_dir / LOG_FILE, record)
    now = resolve(tests, load_history(history, []))
    print(one_line(f"applied review {review.review_id} by {by}: {len(entry.changes)} change(s), no API call"))
    for change in entry.changes:
        print(f"  {change.test_id}  {change.review_decision}; now resolves to {now[change.test_id].source}")
    if stale:
        print(f"  forced over: {'; '.join(stale)}")
    print(f"  rejected {review.count('rejected')}, left pending {review.count('pending')} (not applied)")
    print(f"  written: {written}")
    return EXIT_OK
