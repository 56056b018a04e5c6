"""PyTorch to ``.tflite`` through litert-torch.

A file is an exported program (``torch.export.save`` -> ``.pt2``), converted by
:mod:`tflkit.converters.foreign` in litert-torch's own environment. The Python API also takes an
``nn.Module`` with sample inputs (in a process that has torch) and exports it first.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from tflkit.report.convert_report import ConvertReport

from .base import ConvertOptions

__all__ = ["convert_torch"]


def convert_torch(
    module: Any,
    sample_inputs: tuple[Any, ...],
    output: str | os.PathLike[str],
    options: ConvertOptions | None = None,
) -> ConvertReport:
    """Export ``module`` with ``sample_inputs`` (static shapes) and convert it."""
    import torch

    from .api import convert

    program = torch.export.export(module.eval(), tuple(sample_inputs))
    with tempfile.TemporaryDirectory(prefix="tflkit-torch-") as tmp:
        path = Path(tmp) / f"{type(module).__name__}.pt2"
        torch.export.save(program, path)
        return convert(path, output, options, label=f"<torch module {type(module).__name__}>")
