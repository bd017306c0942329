"""eval_pipeline: evaluation of knowledge-base retrieval as a Dagster asset pipeline."""
