"""Verdicts: the run gate, the regression gate, coverage and the project's gates."""
