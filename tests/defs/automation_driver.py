"""Drive Declarative Automation in process: Dagster's own condition evaluation decides what to
run (`evaluate_automation_conditions`), and this executes exactly what it requested, tagged as
the automation sensor tags its runs. Only the launching is ours; the daemon is exercised by the
backfill test."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property

import dagster as dg
from dagster._core.definitions.observe import observe

from eval_pipeline.defs.automation_conditions import AUTOMATION_RUN_TAG
from eval_pipeline.defs.graph import ALL_ASSETS, SOURCES
from eval_pipeline.orchestration.stages import QUIET_LOGS

SOURCE_NAMES = {s.key.to_user_string() for s in SOURCES}


@dataclass
class Driver:
    resources: dict[str, object]
    instance: dg.DagsterInstance
    now: datetime
    cursor: object = None
    requested: list[dict[str, set[str | None]]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @cached_property
    def defs(self) -> dg.Definitions:
        # Built once: each tick resolves its asset graph, which a new Definitions would redo.
        return dg.Definitions(assets=ALL_ASSETS, resources=self.resources, executor=dg.in_process_executor)

    def tick(self, minutes: float = 1) -> dict[str, set[str | None]]:
        """One evaluation `minutes` after the last; runs what it requested and returns it."""
        self.now += timedelta(minutes=minutes)
        result = dg.evaluate_automation_conditions(
            self.defs,
            self.instance,
            evaluation_time=self.now,
            cursor=self.cursor,  # type: ignore[arg-type]
        )
        self.cursor = result.cursor
        requested = {
            key.to_user_string(): set(result.get_requested_partitions(key))
            for key in self._requested_keys(result)
        }
        self._run(requested)
        self.requested.append(requested)
        return requested

    def settle(self, max_ticks: int = 8) -> set[str]:
        """Tick until nothing more is materialised; every asset materialised along the way
        (the sources' observations on the cron are left out)."""
        seen: set[str] = set()
        for _ in range(max_ticks):
            requested = set(self.tick()) - SOURCE_NAMES
            if not requested:
                return seen
            seen |= requested
        raise AssertionError(f"automation did not settle: {self.requested[-3:]}")

    def _requested_keys(self, result: object) -> list[dg.AssetKey]:
        repo = self.defs.get_repository_def()
        return [
            key
            for key in repo.asset_graph.get_all_asset_keys()
            if result.get_num_requested(key)  # type: ignore[attr-defined]
        ]

    def _run(self, requested: dict[str, set[str | None]]) -> None:
        sources = [s for s in SOURCES if s.key.to_user_string() in requested]
        if sources:
            observe(sources, instance=self.instance, resources=self.resources, run_config=QUIET_LOGS)
        by_partition: dict[str, set[str]] = defaultdict(set)
        for key, partitions in requested.items():
            if key in SOURCE_NAMES:
                continue
            for partition in partitions:
                by_partition[str(partition)].add(key)
        for partition, keys in sorted(by_partition.items()):
            result = dg.materialize(
                ALL_ASSETS,
                selection=sorted(keys),
                partition_key=partition,
                instance=self.instance,
                resources=self.resources,
                tags={AUTOMATION_RUN_TAG: "true"},
                run_config=QUIET_LOGS,
                raise_on_error=False,
            )
            self.failures += [
                f"{partition} {e.step_key}: {e.message}" for e in result.all_events if e.is_step_failure
            ]
