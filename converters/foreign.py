"""Converters that may live in another Python environment (ONNX via onnx2tf, PyTorch via
litert-torch): check the interpreter has the extra, run the worker there, finalize here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tflkit.report.convert_report import ConvertReport

from ._runner import python_module_cmd, run_worker
from .base import ConvertOptions, MissingExtraError
from .provenance import finalize, tool_version
from .tf_common import _raise_for, scratch_dir

__all__ = ["convert_in_env", "has_module"]


def has_module(python: str, module: str) -> bool:
    """Whether ``python`` can import ``module`` (asked in a child, nothing imported here)."""
    code = f"import importlib.util,sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def convert_in_env(
    *,
    worker: str,
    module: str,
    install_hint: str,
    converter: str,
    source: Path,
    output: Path,
    options: ConvertOptions,
    report: ConvertReport,
) -> ConvertReport:
    """Run ``worker`` under ``options.python`` (default: this interpreter) and finalize."""
    import sys

    python = str(options.python or sys.executable)
    if not has_module(python, module):
        raise MissingExtraError(
            f"{report.kind} conversion needs {module} in {python}: {install_hint}"
        )
    with scratch_dir(output) as tmp:
        work = Path(tmp).resolve()
        job = {"source": str(source.resolve()), "options": options.to_json(), "workdir": str(work)}
        (work / "job.json").write_text(json.dumps(job))
        cmd = python_module_cmd(worker, str(work / "job.json"), python=python)
        outcome = run_worker(cmd, work, timeout=options.timeout)
        _raise_for(outcome)
        state = outcome.state
        report.converter = converter
        for key in ("torch", "litert_torch", "onnx2tf", "tensorflow", "onnx", "onnxruntime"):
            if state.get(key):
                report.versions[key] = str(state[key])
        report.versions["ai-edge-litert"] = tool_version("ai-edge-litert") or "unknown"
        report.versions["framework"] = state.get("framework", "")
        report.inputs = state.get("inputs", [])
        report.outputs = state.get("output_names", [])
        report.cpu_vs_reference_max_abs = state.get("cpu_vs_reference_max_abs", {})
        report.convert_seconds = state.get("convert_seconds")
        bundle = work / "reference.npz"
        finalize(
            (work / "model.tflite").read_bytes(),
            report,
            output,
            bundle_tmp=bundle if bundle.is_file() else None,
            extra_notes=state.get("notes", []),
        )
    return report
