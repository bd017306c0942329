"""`python -m eval_pipeline.testing.emulator --port 8765`: the emulator as a standalone server.
Its command line lives here, so the package below the CLI parses no arguments."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from dataclasses import fields
from typing import Any, cast

from eval_pipeline.testing.emulator.config import ALL_FAULTS, EmulatorConfig, FaultKind
from eval_pipeline.testing.emulator.server import start_emulator


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _parse_faults(text: str) -> tuple[FaultKind, ...]:
    unknown = [k for k in _names(text) if k not in ALL_FAULTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown fault kinds {unknown}; choose from {ALL_FAULTS}")
    return cast(tuple[FaultKind, ...], _names(text))


# How a flag reads the config field it sets, by the field's type (None: unset); lists are comma-separated.
_PARSERS: dict[str, Callable[[str], Any]] = {
    "float": float,
    "int": int,
    "tuple[str, ...]": _names,
    "tuple[FaultKind, ...]": _parse_faults,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The API emulator as a standalone loopback server.")
    parser.add_argument("--port", type=int, default=8765)
    for field in fields(EmulatorConfig):  # a flag for each number or list of the config, named as it
        if parse := _PARSERS.get(str(field.type).removesuffix(" | None")):
            parser.add_argument(f"--{field.name.replace('_', '-')}", type=parse, default=field.default)
    handle = start_emulator(**vars(parser.parse_args(argv)))
    print(f"api emulator listening on {handle.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        handle.stop()


if __name__ == "__main__":
    main()
