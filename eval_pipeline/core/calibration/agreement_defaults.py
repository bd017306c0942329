"""The agreement report's defaults, in a module of their own so that the command line's parser
can show them without importing numpy and the review models (core/calibration/agreement.py)."""

# Per-topic figures need enough tests to mean anything: a kappa over two or three tests swings
# from -1 to 1 on a single decision. Topics with fewer judged tests are listed, not scored.
MIN_TOPIC_TESTS = 5
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
