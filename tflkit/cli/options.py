"""Options shared by every command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

JsonOption = Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")]
ModelArgument = Annotated[Path, typer.Argument(help="Path to a .tflite model.", show_default=False)]
InputShapeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--input-shape",
        help="Fix a dynamic input: NAME=D1,D2,... by signature or tensor name (repeatable).",
        metavar="NAME=D1,D2",
        show_default=False,
    ),
]
