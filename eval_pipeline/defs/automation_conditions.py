"""When Dagster's automation materialises what (Declarative Automation, no hand-written sensors).

- Sources are observed on a cron; a new data version (a changed file) is an update downstream.
- Everything else is `eager`: on a new day the latest date partition is missing and gets
  evaluated, and an update upstream (a KB edit, a history change, a newly enabled model's first
  report) re-evaluates only what depends on it. Blocking checks upstream are respected.
- Diffs and comparisons depend on partitions that may never exist (yesterday's report for a new
  model, a paid model nobody runs), so they do not wait for every dependency: they run when a
  report they read changed, and say so when there is nothing to compare yet.
"""

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
