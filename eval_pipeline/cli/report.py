"""`report --html FILE`: the stored evaluations of a results folder as one self-contained HTML
page (trends per model and bank, since last run, failures, topics, every test on click)."""

from __future__ import annotations

import argparse
from typing import Any

from eval_pipeline.cli.exit_status import EXIT_OK, UsageError
from eval_pipeline.cli.flags import add_flags, iso_date, model_key_arg, path_arg, results_dir


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="write stored evaluations as one self-contained HTML report",
        description="Write the stored evaluations (results/<model>/<date>/results.json) as one HTML "
        "file that opens offline: score trends per model and bank over the health bands, what changed "
        "since each model's previous run, failing tests and topics worst first, every test on click.",
    )
    p.add_argument("--html", type=path_arg, required=True, metavar="FILE", help="the HTML file to write")
    add_flags(p, "--results-dir")
    p.add_argument(
        "--model",
        type=model_key_arg,
        action="append",
        default=[],
        metavar="KEY",
        help="a model to include (repeatable; default: every model with results)",
    )
    p.add_argument("--from", dest="date_from", metavar="YYYY-MM-DD", help="first date to include (UTC)")
    p.add_argument("--to", dest="date_to", metavar="YYYY-MM-DD", help="last date to include (UTC)")


def cmd_report(args: argparse.Namespace) -> int:
    from eval_pipeline.core.fileio import atomic_write_text
    from eval_pipeline.core.report.html import render_html
    from eval_pipeline.core.report.shown_ids import shown_history
    from eval_pipeline.core.writable import require_writable_file
    from eval_pipeline.providers.evaluation_index import read_history
    from eval_pipeline.providers.object_store import output_path

    date_from = None if args.date_from is None else iso_date(args.date_from, "--from")
    date_to = None if args.date_to is None else iso_date(args.date_to, "--to")
    if date_from and date_to and date_from > date_to:
        raise UsageError(f"--from {date_from} is after --to {date_to}")
    require_writable_file("--html file", args.html)
    root = results_dir(args)
    history = read_history(output_path(root), set(args.model), date_from, date_to)
    found = {d.provenance.model for d in history.docs}
    missing = [m for m in args.model if m not in found]
    if not history.docs or missing:
        which = ", ".join(missing) or "any model"
        span = f" from {date_from}" if date_from else ""
        span += f" to {date_to}" if date_to else ""
        raise UsageError(f"{root}: no results for {which}{span}; run `eval-pipeline run` first")
    # The models in the order asked for (else the results folder's), each one's dates in order.
    order = {m: i for i, m in enumerate(args.model)}
    docs = sorted(history.docs, key=lambda d: order.get(d.provenance.model, 0))
    html = render_html(*shown_history(docs, history.comparisons))
    atomic_write_text(args.html, html)
    dates = sorted({d.provenance.date for d in history.docs})
    span = f"{dates[0]} to {dates[-1]}"
    print(f"wrote {args.html}: {', '.join(sorted(found))}, {span} ({len(history.docs)} evaluations)")
    return EXIT_OK
