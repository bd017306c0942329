"""How fast a calibration calls Anthropic unless told otherwise.

Apart from `calibrator` so that the code location's run config can name these defaults without
importing the Anthropic SDK (a second and a half, paid by every offline evaluation otherwise).
"""

DEFAULT_RATE_PER_MIN = 48.0  # the specification's pace: one call every 1.25 s
DEFAULT_POLL_S = 10.0  # between looks at a Message Batch
