"""Dagster glue: assets, checks, resources, sensors and schedules wired onto the pure core."""

import warnings

import dagster as dg

# We rely on a few APIs Dagster labels beta (observable sources, Output.data_version, the
# multi-to-single partition mapping) or preview (partitioned asset checks); the version is
# pinned, so the warning is noise for users.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
warnings.filterwarnings("ignore", category=dg.PreviewWarning)
