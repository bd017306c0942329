"""What `calibrate`, `override` and a review share: the expectation flags, their checks, and how
expectations read on the console."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.cli.exit_status import UsageError
from eval_pipeline.cli.flags import listed

if TYPE_CHECKING:  # the parsers import this module: the models load with a command
    from eval_pipeline.core.calibration.proposals import ProposalDiff
    from eval_pipeline.core.inputs.banks import Expectations, RankCheck, SemanticTest
    from eval_pipeline.core.inputs.history_file import HistoryFile
    from eval_pipeline.core.inputs.kb import KnowledgeBase
    from eval_pipeline.core.inputs.loading import Banks


def expectation_args(p: argparse.ArgumentParser) -> None:
    """Expectations typed by a human: an override, or a review's --edit."""
    ids = listed("ENTITY")
    p.add_argument("--primary", help="the entities that must be selected (a miss scores 0)", **ids)
    p.add_argument("--secondary", help="entities that should be selected (-10 each missing)", **ids)
    p.add_argument("--not-expected", help="entities that must not be selected (-20 each)", **ids)
    p.add_argument(
        "--rank",
        **listed("HIGHER>LOWER"),
        help="HIGHER must rank above LOWER when both are selected (-10 otherwise)",
    )


def semantic_tests_of(banks: Banks) -> list[SemanticTest]:
    if banks.semantic is None:
        raise UsageError(f"{banks.root}: no semantic bank to calibrate")
    return banks.semantic.tests


def parse_rank(text: str) -> RankCheck:
    from eval_pipeline.core.inputs.banks import RankCheck

    higher, sep, lower = text.partition(">")
    if not sep or not higher.strip() or not lower.strip() or ">" in lower:
        raise UsageError(f"--rank: '{text}' is not HIGHER>LOWER")
    return RankCheck(higher=higher.strip(), lower=lower.strip())


def parse_gain(text: str) -> tuple[str, int]:
    """`--relevant ENTITY=GAIN`: a whole gain from 0 (judged not relevant) to 1000."""
    from eval_pipeline.core.inputs.banks import MAX_GAIN

    entity, sep, gain = text.partition("=")
    if not sep or not entity.strip() or not gain.strip().isdigit() or int(gain) > MAX_GAIN:
        raise UsageError(f"--relevant: '{text}' is not ENTITY=GAIN (a whole number 0..{MAX_GAIN})")
    return entity.strip(), int(gain)


def validate_entry(kb: KnowledgeBase, kb_path: Path, banks: Banks, entry: HistoryFile, label: str) -> None:
    """A human's expectations get the same cross-checks as bank expectations (the loaded banks
    are already clean); `label` names the entry in the problems."""
    from eval_pipeline.core.inputs.history_file import LoadedHistory
    from eval_pipeline.core.inputs.loading import InputError
    from eval_pipeline.core.inputs.validation import cross_check

    candidate = LoadedHistory(path=Path(label), entry=entry)
    problems = cross_check(kb, kb_path, banks.model_copy(update={"history": [candidate]}))
    if problems:
        raise InputError(problems)


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


def expectation_lines(exp: Expectations) -> list[str]:
    graded = ", ".join(f"{e}={g}" for e, g in exp.relevant.items())
    return [
        f"    primary       {_ids(exp.expected_primary)}",
        *([f"    any of        {_ids(exp.expected_any)}"] if exp.expected_any else []),
        *([f"    relevant      {graded}"] if graded else []),
        f"    secondary     {_ids(exp.expected_secondary)}",
        f"    not expected  {_ids(exp.not_expected)}",
        f"    rank          {_ranks(exp.rank_check)}",
    ]
