"""Two results documents of the same evaluation compared for what was evaluated: when, how long,
which code and runs made it, and what the provider billed (a prompt cache's writes and reads fall
on whichever call came first) left out."""

from __future__ import annotations

from typing import Any

VOLATILE = frozenset(
    {
        "generated_at",
        "latency_ms",
        "cache_hits",
        "duration_s",
        "started_at",
        "finished_at",
        "code_version",
        "run_id",
        "evaluation_id",
        "usage",
        "cost_usd",
    }
)


def stable(value: Any) -> Any:
    """`value` (parsed JSON) without its VOLATILE keys, at any depth."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def differences(left: Any, right: Any, path: str = "") -> list[str]:
    """The paths where two parsed JSON values differ (the first few tell why two documents do)."""
    if isinstance(left, dict) and isinstance(right, dict):
        return [
            d
            for k in sorted(set(left) | set(right))
            for d in differences(left.get(k), right.get(k), f"{path}.{k}")
        ]
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [
            d
            for i, (a, b) in enumerate(zip(left, right, strict=True))
            for d in differences(a, b, f"{path}[{i}]")
        ]
    return [] if left == right else [f"{path}: {left!r} != {right!r}"]
