"""The flags more than one command takes, each declared once, and the checks of flag values: a path
the file system can hold, a finite number in range, a date, a writable --junit file, the project's
gates with the flags given in their place. Every check fails as one usage line naming the flag."""

from __future__ import annotations

import argparse
import errno
import math
import os
from datetime import date as date_type
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.cli.exit_status import UsageError

if TYPE_CHECKING:  # every command's parser imports this module: the models load with a command
    from eval_pipeline.core.verdicts.project_gates import ProjectGates

NAME_MAX = 255  # bytes in one file or folder name (ext4, XFS, btrfs, APFS)
PATH_MAX = 4096  # bytes in a whole path, its terminating NUL included (Linux)
_SHOWN = 40  # characters of an over-long name a message repeats


def _shortened(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}…"


def name_problem(text: str) -> str | None:
    """Why the file system cannot hold the path `text`, or None."""
    encoded = os.fsencode(text)
    longest = max(encoded.split(b"/"), key=len)
    if len(longest) > NAME_MAX:
        name = _shortened(os.fsdecode(longest))
        return f"a name of {len(longest):,} bytes ('{name}'), over the {NAME_MAX}-byte limit of a file name"
    if len(encoded) >= PATH_MAX:
        return f"the path is {len(encoded):,} bytes, over the {PATH_MAX - 1:,}-byte limit of a path"
    return None


def path_arg(text: str) -> Path:
    """`type=` of a path flag: checked before the command starts (else the first open fails deep
    inside it with ENAMETOOLONG); argparse names the flag in the one-line error."""
    problem = name_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return Path(text)


def path_text_arg(text: str) -> str:
    """`type=` of a flag that may be a path (or something else, such as MODEL@DATE)."""
    path_arg(text)
    return text


def model_key_arg(text: str) -> str:
    """`type=` of a `--model` that names a folder of results to read."""
    from eval_pipeline.providers.model_keys import model_key_problem

    problem = model_key_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(f"'{_shortened(text)}': {problem}")
    return text


def name_too_long(exc: OSError) -> UsageError | None:
    """A path built from a flag's value (a model key in a folder name, say) that the file system
    cannot hold: exit 2, naming the path."""
    if exc.errno != errno.ENAMETOOLONG:
        return None
    shown = _shortened(str(exc.filename)) if exc.filename else "a path"
    return UsageError(f"{shown}: {name_problem(str(exc.filename or '')) or 'file name too long'}")


DEFAULT_KB = Path("kb")
DEFAULT_BANKS = Path("test_banks")
_GATES_NOTE = "default: the project's gates (models file, `gates:`)"

# Each shared flag's `add_argument` keywords.
FLAGS: dict[str, dict[str, Any]] = {
    "--kb": {"type": path_arg, "default": DEFAULT_KB, "help": "KB directory or single file"},
    "--banks-dir": {
        "type": path_arg,
        "default": DEFAULT_BANKS,
        "help": "folder of the test banks, rules and expectation history [test_banks]",
    },
    "--models-file": {
        "type": path_arg,
        "default": Path("models.yaml"),
        "help": "the models file: retrieval configurations, limits, prices [models.yaml]",
    },
    "--results-dir": {
        "type": path_arg,
        "help": "reports folder (default: $EVAL_PIPELINE_RESULTS_DIR, else results)",
    },
    "--calibration-dir": {
        "type": path_arg,
        "default": Path("calibration"),
        "help": "folder of review files, raw responses and the calibration log [calibration]",
    },
    "--model": {"action": "append", "default": [], "help": "model key (repeat); default: enabled"},
    "--fail-under": {
        "type": float,
        "help": f"exit 1 when a combined score is below this; {_GATES_NOTE}",
    },
    "--fail-on-regression": {
        "action": argparse.BooleanOptionalAction,
        "help": "exit 1 when the comparison with the model's previous evaluation fails `diff`'s gate; "
        f"{_GATES_NOTE}, else no",
    },
    "--max-errored": {
        "type": int,
        "help": f"exit 1 when more tests than this errored; {_GATES_NOTE}, else 0: an unknown outcome "
        "is no pass",
    },
    "--allow-removed": {
        "action": argparse.BooleanOptionalAction,
        "help": "accept banks and tests the earlier evaluation ran and this one does not (still "
        f"listed); {_GATES_NOTE}, else no",
    },
}


def add_flags(p: argparse.ArgumentParser, *names: str) -> None:
    """The shared flags `names`, in that order; `--kb` marks a command that reads a project."""
    for name in names:
        p.add_argument(name, **FLAGS[name])
    if "--kb" in names:
        p.set_defaults(reads_project=True)


def listed(metavar: str) -> dict[str, Any]:
    """The `add_argument` keywords of a flag taking one or more values, repeatable."""
    return {"nargs": "+", "action": "extend", "default": [], "metavar": metavar}


def junit_arg(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--junit",
        type=path_arg,
        metavar="FILE",
        help=f"also write {what} as JUnit XML to FILE (missing folders are made), for CI test reporters",
    )


def require_project(args: argparse.Namespace) -> None:
    """A command that reads a project, run where there is none and told of none: one line saying
    where it looked and how to point at a project, instead of a problem per missing folder."""
    defaults = args.kb == DEFAULT_KB and args.banks_dir == DEFAULT_BANKS
    if defaults and not DEFAULT_KB.exists() and not DEFAULT_BANKS.exists():
        raise UsageError(
            f"no project in {Path.cwd()}: looked for kb/ and test_banks/ there; run from a project's "
            "folder (`eval-pipeline init DIR` makes one) or pass --kb PATH --banks-dir DIR"
        )


def results_dir(args: argparse.Namespace) -> Path:
    """The local reports folder: --results-dir, else the code location's (the environment's)."""
    from eval_pipeline.location import location_paths

    return args.results_dir if args.results_dir is not None else location_paths().results_dir


def iso_date(text: str, flag: str) -> str:
    """`text` as a YYYY-MM-DD date."""
    try:
        return date_type.fromisoformat(text).isoformat()
    except ValueError:
        raise UsageError(f"{flag}: '{text}' is not YYYY-MM-DD") from None


def check_number(
    flag: str,
    value: float | None,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
) -> None:
    """`value` is finite, >= low, <= high and > above (each bound when given); None is unset.
    argparse's `type=float` takes `nan`, `inf` and `1e400`, and a NaN threshold compares false
    with everything: no gate at all."""
    if value is None:
        return
    if not math.isfinite(value):
        raise UsageError(f"{flag}: {value} is not a finite number")
    too_low = (low is not None and value < low) or (above is not None and value <= above)
    if too_low or (high is not None and value > high):
        bounds = ((">=", low), (">", above), ("<=", high))
        allowed = " and ".join(f"{op} {bound:g}" for op, bound in bounds if bound is not None)
        raise UsageError(f"{flag}: {value:g} is out of range (must be {allowed})")


def check_junit(path: Path | None) -> None:
    """Before any evaluation or read: a FILE that cannot be written is bad input (exit 2)."""
    from eval_pipeline.core.writable import require_writable_file

    if path is not None:
        require_writable_file("--junit file", path)


def project_gates(args: argparse.Namespace, kept: ProjectGates | None = None) -> ProjectGates:
    """The models file's gates (`kept`, when the command has read the file already) with the
    flags of `args` that were given in their place."""
    if kept is None:
        from eval_pipeline.providers.models import load_gates

        kept = load_gates(args.models_file)
    return kept.overridden(
        fail_under=getattr(args, "fail_under", None),
        max_errored=getattr(args, "max_errored", None),
        fail_on_regression=getattr(args, "fail_on_regression", None),
        allow_removed=args.allow_removed,
    )
