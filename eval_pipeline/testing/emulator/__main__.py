"""`python -m eval_pipeline.testing.emulator --port 8765`: the emulator as a standalone server."""

from eval_pipeline.testing.emulator.server import main

main()
