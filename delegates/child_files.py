"""The files a runner's child process reads and writes: input sets in, a state file and output
sets back (``s{k}_in_{i}`` / ``s{k}_out_{j}`` arrays in one ``.npz``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .protocol import Feed

__all__ = ["read_output_sets", "read_state", "write_input_sets"]


def write_input_sets(path: Path, feeds: Sequence[Feed], names: Sequence[str]) -> None:
    """Every input set of ``feeds`` (inputs in the order of ``names``) into one ``.npz``."""
    np.savez(
        path, **{f"s{k}_in_{i}": f[n] for k, f in enumerate(feeds) for i, n in enumerate(names)}
    )


def read_state(path: Path) -> dict[str, Any] | None:
    """The child's last state (JSON), or None when it wrote none readable (it died first)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_output_sets(path: Path, sets: int, labels: Sequence[str]) -> list[dict[str, np.ndarray]]:
    """``sets`` output sets from the child's ``.npz``, each output named by ``labels``."""
    with np.load(path, allow_pickle=False) as npz:
        return [{lab: npz[f"s{k}_out_{j}"] for j, lab in enumerate(labels)} for k in range(sets)]
