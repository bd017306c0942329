"""When Dagster's automation materialises what (Declarative Automation, no hand-written sensors).

Sources are observed on a cron (a changed file is a new data version). Everything else is
`eager` (a new day's missing partition, an update upstream), respecting blocking checks, except
diffs and comparisons: they depend on partitions that may never exist (a new model's yesterday,
a paid model nobody runs), so they run when a report they read changed.
"""

from collections.abc import Callable
from typing import Any

import dagster as dg

OBSERVE_CRON = "*/5 * * * *"
# Dagster tags every run (and backfill run) the automation sensor launches with this.
AUTOMATION_RUN_TAG = "dagster/from_automation_condition"

OBSERVE = dg.AutomationCondition.cron_tick_passed(OBSERVE_CRON) & ~dg.AutomationCondition.in_progress()
EAGER = dg.AutomationCondition.eager() & dg.AutomationCondition.all_deps_blocking_checks_passed()
WHEN_A_REPORT_CHANGES = (
    dg.AutomationCondition.in_latest_time_window()
    & dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
)


def evaluation_asset(
    group: str,
    partitions: dg.PartitionsDefinition,
    io_manager_key: str,
    automation: dg.AutomationCondition[Any] = EAGER,
    **asset: Any,
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """`dg.asset` for an asset of the evaluation graph: grouped, partitioned, stored by an IO
    manager, and automated (`EAGER` unless said)."""
    decorator: Callable[[Callable[..., Any]], dg.AssetsDefinition] = dg.asset(
        group_name=group,
        partitions_def=partitions,
        io_manager_key=io_manager_key,
        automation_condition=automation,
        **asset,
    )
    return decorator
