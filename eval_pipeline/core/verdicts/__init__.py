"""Verdicts: the run gate, the regression gate, coverage and identity."""
