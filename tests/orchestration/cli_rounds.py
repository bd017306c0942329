"""`eval-pipeline` commands run one after another in this one process, each when the test asks:
a line on stdin (JSON: `cwd`, `env` to set, `argv`) starts one; its output goes to stdout, then
EXIT_LINE with its exit code. Two of these released at once race as two commands started at once
do, without paying a fresh interpreter's imports for every race. The first command is what a
fresh process runs: nothing of Dagster or the project is imported before it.
"""

from __future__ import annotations

import gc
import json
import os
import sys

from eval_pipeline.cli import main

EXIT_LINE = "cli_rounds: exit "

if __name__ == "__main__":
    for line in sys.stdin:
        command = json.loads(line)
        os.chdir(command["cwd"])
        os.environ.update(command["env"])
        code = main(command["argv"])
        print(f"{EXIT_LINE}{code}", flush=True)
    # No final collection over everything the commands built (~1 s of CPU at exit): nothing
    # here is checked after the last command.
    gc.freeze()
