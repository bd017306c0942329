"""`show`: a stored run's summary, or one test in full."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.exit_status import EXIT_OK, UsageError
from eval_pipeline.cli.flags import add_flags, model_key_arg, results_dir

if TYPE_CHECKING:  # the parser imports this module: the result models load with the command
    from eval_pipeline.core.scoring.run_document import RunDocument


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "show",
        help="print a stored run's summary, or one test in full",
        description="Print the summary of each model's stored evaluation on a date, or with --test "
        "that test's full result as JSON on stdout (pipe it into jq or python -m json.tool).",
    )
    p.add_argument("--model", type=model_key_arg, help="model key; default: every model with results")
    p.add_argument("--date", help="default: the latest date with results")
    p.add_argument("--test", help="print this test's full result")
    add_flags(p, "--models-file", "--results-dir")


def _documents(args: argparse.Namespace) -> list[RunDocument]:
    from eval_pipeline.core.scoring.run_document import RESULTS_FILE, model_dirs, read_document, result_dates

    root = results_dir(args)
    docs = []
    for model_dir in [root / args.model] if args.model else model_dirs(root):
        dates = result_dates(model_dir)
        date = args.date or (dates[-1] if dates else None)
        if date in dates:
            docs.append(read_document(model_dir / date / RESULTS_FILE))
    if not docs:
        where = f"{root}/{args.model or '*'}/{args.date or '<latest>'}"
        raise UsageError(f"no results found at {where}; run `eval-pipeline run` first")
    return docs


def cmd_show(args: argparse.Namespace) -> int:
    from eval_pipeline.core.report.markdown import console_summary
    from eval_pipeline.core.report.shown_ids import as_shown

    docs = _documents(args)
    if args.test is None:
        for doc in docs:
            print(console_summary(as_shown(doc)))
        return EXIT_OK
    # Nothing but one JSON value on stdout, so it pipes into jq: model and date are fields.
    shown: list[dict[str, Any]] = []
    for doc in docs:
        matches = [r for r in doc.all_results() if r.test_id == args.test]
        if not matches:
            raise UsageError(f"--test: {args.test} is not in {doc.provenance.model} @ {doc.provenance.date}")
        shown += [
            {"model": doc.provenance.model, "date": doc.provenance.date, "result": r.model_dump(mode="json")}
            for r in matches
        ]
    print(json.dumps(shown, indent=2))
    return EXIT_OK
