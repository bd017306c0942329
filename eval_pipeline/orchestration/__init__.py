"""What drives Dagster from the command line: the project instance, stages, parallel model runs,
backfills and up-to-date checks. `defs/` holds the definitions these run; nothing there imports
from here."""
