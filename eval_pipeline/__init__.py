"""eval_pipeline: evaluation of knowledge-base retrieval as a Dagster asset pipeline."""

from eval_pipeline import moved_modules

moved_modules.install()
