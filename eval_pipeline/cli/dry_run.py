"""`run --dry-run`: per model, the API calls, tokens and estimated USD the run would spend, with
what the caches already hold; nothing is called and nothing is written."""

from __future__ import annotations

from eval_pipeline.cli.exit_status import EXIT_OK
from eval_pipeline.orchestration.evaluation_route import EvaluationRequest
from eval_pipeline.providers.pricing import usd


def _tokens(input_tokens: int, output_tokens: int) -> str:
    output = f" + ~{output_tokens:,} output" if output_tokens else ""
    return f"{input_tokens:,} input{output} tokens"


def dry_run(request: EvaluationRequest) -> int:
    from eval_pipeline.providers.spend_estimate import CHARS_PER_TOKEN, estimate_spend

    print(
        f"dry run: estimates only, nothing is called or written (tokens ~ characters / {CHARS_PER_TOKEN}; "
        "cached answers cost nothing)"
    )
    embedded: set[tuple[str, str, str]] = set()  # shared by models with the same embedder
    for model, cfg in request.configs.items():
        spend = estimate_spend(
            cfg,
            request.kb.entities,
            request.banks,
            request.scope,
            request.location.cache_dir,
            request.cache_mode,
            batch=request.batch,
            embedded=embedded,
        )
        if not spend.stages:
            print(f"{model}: offline: 0 API calls, {usd(0)}")
            continue
        cached = sum(s.cached for s in spend.stages)
        cost = f"~{usd(spend.cost_usd)}"
        cost += f" (at most {usd(spend.max_cost_usd)})" if spend.max_cost_usd != spend.cost_usd else ""
        cost += " + what the team's system costs" if spend.unpriced else ""
        print(
            f"{model}: {spend.calls:,} calls, {_tokens(spend.input_tokens, spend.output_tokens)}, "
            f"{cost}; {cached:,} answers cached"
        )
        for s in spend.stages:
            line = f"  {s.stage} {s.model_id}: {s.calls:,} calls"
            if s.input_tokens or s.usage.output_tokens:
                line += f", {_tokens(s.input_tokens, s.usage.output_tokens)}"
            line += f", {s.cached:,} cached"
            if s.cost_usd is not None:
                line += f", {usd(s.cost_usd)}" if s.cost_usd == s.max_cost_usd else f", ~{usd(s.cost_usd)}"
            print(line + (f" ({s.note})" if s.note else ""))
    print(
        "  not included: repair calls after an invalid answer, retried failures, and the re-trials "
        "a non-reproducible model makes of a regressed test"
    )
    return EXIT_OK
