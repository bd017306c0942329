"""Whether a Dagster daemon serves the instance's backfills now (`dg dev`, a deployment's).

Dagster counts a daemon alive for 30 minutes after its last heartbeat (one every 30 s); here,
for three heartbeats (`FRESH_S`), so a command relying on a killed one carries its backfill on
after a minute and a half.
"""

from __future__ import annotations

import time

import dagster as dg

FRESH_S = 90.0


def daemon_alive(instance: dg.DagsterInstance) -> bool:
    """Whether the daemon that runs backfills said it was alive within the last `FRESH_S`."""
    heartbeat = instance.get_daemon_heartbeats().get("BACKFILL")
    return heartbeat is not None and time.time() - heartbeat.timestamp < FRESH_S
