"""`python -m eval_pipeline.cli`: the same command as `eval-pipeline`."""

import sys

from eval_pipeline.cli import console

sys.exit(console())
