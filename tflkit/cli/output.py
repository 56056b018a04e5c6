"""Writing reports to stdout: JSON or rich text."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console


def console() -> Console:
    """A console for reports; 120 columns when stdout is not a terminal (pipes, CI logs)."""
    return Console(highlight=False, width=None if sys.stdout.isatty() else 120)


def print_json(payload: dict[str, Any]) -> None:
    """One write of the whole document (``json.dump`` writes each token: 100k+ calls)."""
    sys.stdout.write(json.dumps(payload, indent=2, default=str) + "\n")
