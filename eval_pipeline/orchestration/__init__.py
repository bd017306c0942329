"""What drives Dagster from the command line: the project instance (created under a lock), stages,
parallel model runs, backfills and up-to-date checks. `defs/` holds the definitions these run and
`runtime/` what runs under them; nothing in either imports from here."""
