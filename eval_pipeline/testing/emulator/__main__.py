"""`python -m eval_pipeline.testing.emulator --port 8765`: the emulator as a standalone server.
Its command line lives here, so the package below the CLI parses no arguments."""

from __future__ import annotations

import argparse
import threading
from typing import cast

from eval_pipeline.testing.emulator.config import ALL_FAULTS, FaultKind
from eval_pipeline.testing.emulator.server import start_emulator


def _parse_faults(text: str) -> tuple[FaultKind, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in ALL_FAULTS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown fault kinds {unknown}; choose from {ALL_FAULTS}")
    return cast(tuple[FaultKind, ...], kinds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The API emulator as a standalone loopback server.")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--rpm", type=float, default=None)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--faults", type=_parse_faults, default=ALL_FAULTS)
    parser.add_argument(
        "--fault-routes",
        type=lambda text: tuple(r.strip() for r in text.split(",") if r.strip()),
        default=(),
        help="inject faults only on these paths, comma-separated (default: every path)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stall-s", type=float, default=5.0)
    parser.add_argument("--embed-dim", type=int, default=256)
    parser.add_argument(
        "--cache-min-tokens",
        type=int,
        default=None,
        help="minimum cacheable prompt prefix for every model (default: the per-model table)",
    )
    args = parser.parse_args(argv)
    handle = start_emulator(**vars(args))  # the options are named as the config's fields
    print(f"api emulator listening on {handle.base_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        handle.stop()


if __name__ == "__main__":
    main()
