"""Dagster glue: assets, checks, resources, sensors and schedules wired onto the pure core."""

import atexit
import gc
import warnings

import dagster as dg

# We rely on a few APIs Dagster labels beta (observable sources, Output.data_version, the
# multi-to-single partition mapping) or preview (partitioned asset checks); the version is
# pinned, so the warning is noise for users.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)

# Every process that loads the definitions (a run's worker, a code server, the daemon, the CLI)
# ends with Python's exit collection over all it still holds, Dagster's definitions among them:
# ~0.5 s of CPU a process, only for the process to end. Frozen at exit, the collector skips them;
# every exit handler (Dagster's, logging's flush) still runs.
atexit.register(gc.freeze)
