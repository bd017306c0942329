"""Path flags: a name the file system cannot hold is a usage error naming the flag, before the
command starts (else the first open fails deep inside it with ENAMETOOLONG)."""

from __future__ import annotations

import argparse
import errno
import os
from pathlib import Path

from eval_pipeline.cli.exit_status import UsageError

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
    """`type=` of a path flag: argparse names the flag in the one-line error."""
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
