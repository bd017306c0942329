"""`override`: a clinician records (or withdraws) a test's expectations; it stands over any
later calibration until withdrawn."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.exit_status import EXIT_OK, UsageError
from eval_pipeline.cli.expectations import (
    expectation_args,
    expectation_lines,
    parse_gain,
    parse_rank,
    semantic_tests_of,
    validate_entry,
)
from eval_pipeline.cli.flags import add_flags, listed

if TYPE_CHECKING:  # the parser imports this module: the models load with the command
    from eval_pipeline.core.expectations.resolution import ResolvedExpectation
    from eval_pipeline.core.inputs.history_file import HumanOverride


def add_commands(sub: Any) -> None:
    o = sub.add_parser(
        "override",
        help="record (or --withdraw) a human override of a test's expectations",
        description="Record a human's expectations for one semantic test in a new history file: "
        "they stand over any later calibration until --withdraw ends them.",
    )
    o.add_argument("test_id", help="the semantic test's id")
    expectation_args(o)
    o.add_argument("--any", **listed("ENTITY"), help="at least one of these must be selected")
    o.add_argument("--relevant", **listed("ENTITY=GAIN"), help="graded judgments")
    o.add_argument("--withdraw", action="store_true", help="end the standing override")
    o.add_argument("--by", required=True, help="who decides (recorded)")
    o.add_argument("--reason", required=True, help="why (recorded)")
    add_flags(o, "--kb", "--banks-dir")


def _override(args: argparse.Namespace, current: ResolvedExpectation) -> HumanOverride:
    from eval_pipeline.core.dates import now_utc

    today = now_utc().date().isoformat()
    if not args.by.strip() or not args.reason.strip():
        raise UsageError("--by and --reason must not be empty")
    if args.withdraw:
        if args.primary or args.any or args.relevant or args.secondary or args.not_expected or args.rank:
            raise UsageError("--withdraw takes no expectations")
        if current.source_kind != "human_override":
            raise UsageError(
                f"{args.test_id} has no standing override to withdraw (source: {current.source})"
            )
        return _checked(override_date=today, by=args.by, reason=args.reason, withdraw=True)
    relevant = dict(parse_gain(text) for text in args.relevant)
    if not (args.primary or args.any or any(g > 0 for g in relevant.values())):
        raise UsageError("an override needs --primary, --any or a --relevant gain above 0 (or --withdraw)")
    return _checked(
        expected_primary=args.primary,
        expected_any=args.any,
        relevant=relevant,
        expected_secondary=args.secondary,
        not_expected=args.not_expected,
        rank_check=[parse_rank(r).model_dump() for r in args.rank],
        override_date=today,
        by=args.by.strip(),
        reason=args.reason.strip(),
    )


# The flag each recorded field comes from, for a value the record refuses (a --reason too long).
_FLAGS = {
    "expected_primary": "--primary",
    "expected_any": "--any",
    "relevant": "--relevant",
    "expected_secondary": "--secondary",
    "not_expected": "--not-expected",
    "rank_check": "--rank",
    "by": "--by",
    "reason": "--reason",
}


def _checked(**fields: Any) -> HumanOverride:
    """The override as recorded, or one usage line naming the flag whose value it refuses."""
    from pydantic import ValidationError

    from eval_pipeline.core.inputs.history_file import HumanOverride

    try:
        return HumanOverride(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        got = fields.get(field)
        size = f" (got {len(got):,})" if isinstance(got, str) else ""
        raise UsageError(f"{_FLAGS.get(field, field)}: {first['msg']}{size}") from None


def cmd_override(args: argparse.Namespace) -> int:
    from eval_pipeline.core.control_chars import one_line
    from eval_pipeline.core.dates import now_utc
    from eval_pipeline.core.expectations.resolution import resolve
    from eval_pipeline.core.inputs.history_file import HistoryChange, HistoryFile, append_history
    from eval_pipeline.core.inputs.loading import history_dir, load_history
    from eval_pipeline.core.inputs.validation import load_validated

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
    print(one_line(f"override {verb} for {args.test_id} by {override.by}: {override.reason}"))
    if not override.withdraw:
        print("\n".join(expectation_lines(override.expectations())))
    print(f"  was {current.source}; now resolves to {now.source}\n  written: {path}")
    return EXIT_OK
