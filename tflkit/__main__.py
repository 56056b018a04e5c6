"""``python -m tflkit``."""

from tflkit.cli.main import run

run()
