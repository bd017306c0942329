"""The release gate's defaults, in a module of their own so that the command line's parser can
show them without importing the result models (core/verdicts/run_gate.py)."""

# An errored test is an unknown outcome, not a pass: by default not one is allowed.
DEFAULT_MAX_ERRORED = 0
