"""`models`: the configured models, whether enabled, what they cost, which keys they lack."""

from __future__ import annotations

import argparse
from typing import Any

from eval_pipeline.cli.exit_status import EXIT_OK
from eval_pipeline.cli.flags import add_flags


def add_commands(sub: Any) -> None:
    p = sub.add_parser(
        "models",
        help="list the configured models",
        description="List the models file's models: enabled or not, free or paid, their embedder "
        "and reranker (or the team's system), rate limits, and the API key variables still unset.",
    )
    add_flags(p, "--models-file", "--results-dir")


def cmd_models(args: argparse.Namespace) -> int:
    from eval_pipeline.providers.models import load_models, missing_keys
    from eval_pipeline.providers.url_redaction import redact_url

    for key, m in load_models(args.models_file).items():
        missing = missing_keys(m)
        state = "enabled" if m.enabled else "disabled"
        cost = "paid API" if m.cost_incurring else "free/offline"
        keys = f"; needs {', '.join(missing)}" if missing else ""
        rate = f", {m.rate_limit_per_min:g}/min" if m.rate_limit_per_min else ""
        stages = []
        if m.embedder is not None and m.reranker is not None:
            stages.append(
                f"embedder {m.embedder.kind}:{m.embedder.model_id} · "
                f"reranker {m.reranker.kind}:{m.reranker.model_id}{rate}"
            )
        if m.system is not None:
            at = f" at {redact_url(m.system.url)}" if m.system.url else ""
            stages.append(f"system {m.system.kind}{at} for {', '.join(x.value for x in m.system_mechanisms)}")
        print(f"{key:16} {state:8} {cost:12} {' · '.join(stages)}{keys}")
    return EXIT_OK
