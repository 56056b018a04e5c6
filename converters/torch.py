"""PyTorch to ``.tflite`` through litert-torch (the ``torch`` extra).

A file is an exported program (``torch.export.save`` -> ``.pt2``); the Python API also takes an
``nn.Module`` with sample inputs and exports it first. litert-torch runs in a child process,
under ``ConvertOptions.python`` when the extra lives in another environment.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from tflkit.report.convert_report import ConvertReport

from .base import ConvertOptions

__all__ = ["INSTALL_HINT", "convert_exported_program", "convert_torch"]

INSTALL_HINT = "pip install 'tflkit[torch]' (torch==2.13.0 CPU, litert-torch==0.10.0)"


def convert_exported_program(
    source: Path, output: Path, options: ConvertOptions, report: ConvertReport
) -> ConvertReport:
    from .foreign import convert_in_env

    return convert_in_env(
        worker="tflkit.converters._torch_worker",
        module="litert_torch",
        install_hint=INSTALL_HINT,
        converter="litert-torch",
        source=source,
        output=output,
        options=options,
        report=report,
    )


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
