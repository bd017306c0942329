"""`export-trec`: an evaluation's semantic rankings and judgments as TREC run and qrels files in the
imported collection's own ids, which the results do not keep: they are read from the KB and semantic
bank, refused rather than guessed at unless their hashes are the ones the evaluation recorded."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.exit_status import EXIT_OK, UsageError
from eval_pipeline.cli.flags import add_flags, model_key_arg, path_arg, results_dir
from eval_pipeline.cli.run import parse_date

if TYPE_CHECKING:  # the parser imports this module: the models load with the command
    from eval_pipeline.core.inputs.kb import KnowledgeBase
    from eval_pipeline.core.inputs.loading import Banks
    from eval_pipeline.core.scoring.run_document import RunDocument


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "export-trec",
        help="write an evaluation's rankings and judgments as TREC run and qrels files",
        description="run.trec holds each semantic test's ranking (the reranker's picks, then the other "
        "candidates) and qrels.trec its judgments, both in the original ids, for trec_eval or ir_measures.",
    )
    p.add_argument("--model", type=model_key_arg, required=True, help="model key of the evaluation")
    p.add_argument("--date", required=True, help="date of the evaluation (YYYY-MM-DD)")
    p.add_argument("--out", type=path_arg, required=True, help="folder for run.trec and qrels.trec")
    add_flags(p, "--results-dir", "--kb", "--banks-dir")


def _evaluation(args: argparse.Namespace) -> RunDocument:
    from eval_pipeline.core.scoring.run_document import RESULTS_FILE, read_document

    date = parse_date(args.date)
    path = results_dir(args) / args.model / date / RESULTS_FILE
    if not path.is_file():
        raise UsageError(f"no evaluation of model '{args.model}' on {date} ({path} not found)")
    return read_document(path)


def _same_inputs(doc: RunDocument, kb: KnowledgeBase, banks: Banks, kb_path: Path) -> None:
    made = doc.provenance
    if kb.content_hash != made.kb_hash:
        raise UsageError(
            f"{kb_path}: KB hash {kb.content_hash[:12]} is not the {made.kb_hash[:12]} that {made.model} @ "
            f"{made.date} was evaluated on; pass that KB with --kb to map its ids back"
        )
    semantic = banks.layout.semantic
    if banks.file_hashes.get(semantic) != made.bank_hashes.get(semantic):
        raise UsageError(
            f"{banks.root / semantic}: not the semantic bank {made.model} @ {made.date} was evaluated on; "
            "pass that bank's folder with --banks-dir to map its ids back"
        )


def cmd_export_trec(args: argparse.Namespace) -> int:
    from eval_pipeline.core.fileio import atomic_write_text
    from eval_pipeline.core.inputs.external_ids import OriginalIds, recorded_original_ids
    from eval_pipeline.core.inputs.validation import load_validated
    from eval_pipeline.core.report.trec import (
        QRELS_FILE,
        RUN_FILE,
        qrel_rows,
        qrels_text,
        ranked_results,
        run_rows,
        run_text,
    )

    doc = _evaluation(args)
    kb, banks = load_validated(args.kb, args.banks_dir)
    _same_inputs(doc, kb, banks, args.kb)
    ids = recorded_original_ids(kb.entities, banks.semantic_tests) or OriginalIds()
    run, qrels = run_rows(doc.semantic, ids), qrel_rows(doc.semantic, ids)
    out: Path = args.out
    atomic_write_text(out / RUN_FILE, run_text(run, doc.provenance.model))
    atomic_write_text(out / QRELS_FILE, qrels_text(qrels))
    ranked = len(ranked_results(doc.semantic))
    unranked = len({r.test_id for r in doc.semantic}) - ranked
    print(
        f"wrote {out / RUN_FILE} ({ranked} queries, {len(run)} rows) and {out / QRELS_FILE} "
        f"({len(qrels)} judgments); left out {unranked} errored tests (no ranking)"
    )
    return EXIT_OK
