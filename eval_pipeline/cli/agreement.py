"""`agreement`: the calibrator's proposals against the clinicians' review decisions, printed and
written as a markdown report (core/calibration/agreement.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from eval_pipeline.cli.exit_status import EXIT_OK, UsageError
from eval_pipeline.cli.flags import add_flags, path_arg


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "agreement",
        help="calibrator vs human decisions: percent, Cohen's kappa, disagreements",
        description="Compare the calibrator's proposals with the humans' review decisions: "
        "agreement, Cohen's kappa with a bootstrap interval, the confusion matrix and the "
        "disagreements, printed and written as a markdown report.",
    )
    add_flags(p, "--calibration-dir")
    p.add_argument(
        "--report",
        type=path_arg,
        default=Path("results/calibration_agreement.md"),
        help="where the markdown report goes [results/calibration_agreement.md]",
    )
    # The defaults are core/calibration/agreement.py's; the parser does not import numpy to read them.
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed [%(default)s]")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples [%(default)s]")
    p.add_argument("--min-topic-tests", type=int, default=5, help="judged tests a topic needs [%(default)s]")
    add_flags(p, "--kb", "--banks-dir")


def cmd_agreement(args: argparse.Namespace) -> int:
    from eval_pipeline.core.calibration.agreement import agreement_from_files, markdown
    from eval_pipeline.core.fileio import atomic_write_text
    from eval_pipeline.core.inputs.validation import load_validated

    if args.resamples < 1 or args.min_topic_tests < 1:
        raise UsageError("--resamples and --min-topic-tests must be at least 1")
    _, banks = load_validated(args.kb, args.banks_dir)
    report, unreadable = agreement_from_files(
        args.calibration_dir,
        banks,
        resamples=args.resamples,
        seed=args.seed,
        min_topic_tests=args.min_topic_tests,
    )
    for problem in unreadable:
        print(f"warning: {problem}; skipped", file=sys.stderr)
    text = markdown(report)
    atomic_write_text(args.report, text)
    print(text, end="")
    print(f"written: {args.report}")
    return EXIT_OK
