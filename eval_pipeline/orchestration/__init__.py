"""What drives Dagster from the command line: the project instance (created under a lock), stages,
parallel model runs, backfills, up-to-date checks and the monitoring of runs whose process is gone.
`defs/` holds the definitions these run; nothing there imports from here."""
