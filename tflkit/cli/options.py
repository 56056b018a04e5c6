"""Options shared by every command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

JsonOption = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]
ModelArgument = Annotated[Path, typer.Argument(help="Path to a .tflite model.", show_default=False)]
