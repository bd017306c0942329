"""Whether a Dagster daemon serves the instance's backfills now (`dg dev`, a deployment's).

A daemon writes a heartbeat every 30 s, and Dagster counts it alive until its last heartbeat is
30 minutes old, so a daemon that was killed looks alive for half an hour. Here it counts as
alive while its last heartbeat is younger than `FRESH_S`, three heartbeats: a command that relied
on one that was killed carries its backfill on a minute and a half later.
"""

from __future__ import annotations

import time

import dagster as dg

FRESH_S = 90.0


def daemon_alive(instance: dg.DagsterInstance) -> bool:
    """Whether the daemon that runs backfills said it was alive within the last `FRESH_S`."""
    heartbeat = instance.get_daemon_heartbeats().get("BACKFILL")
    return heartbeat is not None and time.time() - heartbeat.timestamp < FRESH_S
