"""What drives Dagster from the command line: instance, runs, monitoring."""
