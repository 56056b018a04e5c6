"""``regress record``: run a model on every selected runner and keep what it did as a baseline.

The runs are ``tflkit.validation.pipeline.validate`` on input sets made here once
(``tflkit.validation.inputs``, the same realistic generator validate uses, or the user's file) and
stored as they were fed; the residency is ``tflkit.rewriter.advice.check_path`` (static, and probed
on the real accelerator).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import statistics
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tflkit.compare.tolerances import DEFAULTS, Tolerance, precision_of
from tflkit.delegates.base import RECORD_DEFAULT
from tflkit.errors import UsageError
from tflkit.regress.baseline import BASELINE_SCHEMA, Baseline
from tflkit.validation.options import InputSetOptions

if TYPE_CHECKING:
    from tflkit.report.validate_report import ValidateReport

__all__ = ["RecordOptions", "record", "run_models", "runner_tolerance", "versions"]

DEFAULT_RUNNERS = RECORD_DEFAULT
_STORED = ("rtol", "atol", "min_cosine")


@dataclass
class RecordOptions(InputSetOptions):
    """What to record, on which inputs (realistic by default, what validate feeds).
    ``tolerances`` keys: "all", "fp16", "fp32" or a runner name."""

    runners: Sequence[str] = ()
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    probe: bool = True
    target: str | None = None
    latency: bool = False
    delegate: Path | None = None
    timeout: float = 300.0
    #: another runtime to record with (:class:`tflkit.harness.runtimes.RuntimeEnv`)
    runtime: Any = None


def runner_tolerance(
    runner: str,
    overrides: Mapping[str, Mapping[str, float]] | None = None,
    recorded: Mapping[str, Any] | None = None,
) -> Tolerance:
    """How far a rerun of ``runner`` may move from its baseline: a fixed ``atol + rtol * peak``.

    The default is validate's fixed bound for the runner's precision class (``DEFAULTS``): a new
    runtime or converter may move a runner as far as the runner may legitimately be from the
    CPU, no further. ``recorded`` (a baseline's stored bound) replaces the default; overrides
    then apply in order "all", the precision class, the runner's name.
    """
    klass = precision_of(runner)
    tolerance = replace(DEFAULTS[klass], basis=f"{DEFAULTS[klass].basis} (fixed bound)")
    if "noise_factor" in {f.name for f in fields(Tolerance)}:
        tolerance = replace(tolerance, noise_factor=0.0)
    if recorded:
        tolerance = replace(tolerance, **{k: recorded[k] for k in _STORED if k in recorded})
    for key in ("all", klass, runner):
        values = {k: v for k, v in ((overrides or {}).get(key) or {}).items() if k in _STORED}
        if values:
            tolerance = replace(tolerance, **values, basis=f"overridden ({key})")
    return tolerance


def stored_tolerance(tolerance: Tolerance) -> dict[str, Any]:
    """The part of a tolerance a baseline keeps (the fixed bound and where it comes from)."""
    return {k: getattr(tolerance, k) for k in (*_STORED, "basis")}


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def versions(adapter: str | None) -> dict[str, Any]:
    """tflkit, LiteRT, TensorFlow (if installed, never imported), numpy, the GPU adapter."""
    return {
        "tflkit": _version("tflkit"),
        "ai-edge-litert": _version("ai-edge-litert"),
        "tensorflow": _version("tensorflow-cpu", "tensorflow"),
        "numpy": np.__version__,
        "gpu_adapter": adapter,
    }


def check_runners(names: Sequence[str], delegate: Path | None) -> list[str]:
    """The runners to record, validated; a usage error names the ones a baseline cannot hold."""
    from tflkit.validation.tflite_subject import RUNNERS

    recordable = [n for n in RUNNERS if n != "reference"]  # rerun from the model file alone
    chosen = list(dict.fromkeys(names or DEFAULT_RUNNERS))
    if delegate is not None and "delegate" not in chosen:
        chosen.append("delegate")
    bad = [n for n in chosen if n not in recordable]
    if bad:
        raise UsageError(
            f"runner(s) {bad} cannot be recorded in a baseline; choose from {', '.join(recordable)}"
        )
    if "delegate" in chosen and delegate is None:
        raise UsageError("the delegate runner needs --delegate path/to/delegate.so")
    return chosen


def run_models(
    model_path: Path,
    feeds: Sequence[Mapping[str, np.ndarray]],
    runners: Sequence[str],
    *,
    signature: str | None,
    input_shapes: Mapping[str, tuple[int, ...]],
    delegate: Path | None,
    timeout: float,
) -> ValidateReport:
    """``validate`` on exactly these input sets (handed over as an ``.npz``)."""
    from tflkit.regress.baseline import npz_bytes
    from tflkit.validation.pipeline import ValidateOptions, validate

    names = list(feeds[0])
    arrays = {n: np.stack([np.asarray(f[n]) for f in feeds]) for n in names}
    with tempfile.TemporaryDirectory(prefix="tflkit-regress-") as tmp:
        path = Path(tmp) / "inputs.npz"
        path.write_bytes(npz_bytes(arrays))
        options = ValidateOptions(
            runners=list(runners),
            inputs=path,
            signature=signature,
            input_shapes=dict(input_shapes),
            delegate=delegate,
            timeout=timeout,
            calibrate=False,  # regress compares each runner with itself, not runner pairs
        )
        return validate(model_path, options)


def output_specs(outputs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Name, dtype, shape and quantization of each output (what a comparison needs)."""
    from tflkit.ir.entry import IoSpec

    specs = []
    for name, tensor in outputs.items():
        spec = IoSpec(name, tensor, tensor.shape)
        quant = spec.quant
        specs.append(
            {
                "name": name,
                "dtype": spec.dtype.name,
                "shape": [int(d) for d in tensor.shape],
                "scale": quant[0] if quant else None,
                "zero_point": quant[1] if quant else 0,
            }
        )
    return specs


def _executed(executed: Mapping[str, Any]) -> dict[str, Any]:
    """What ran, without anything that changes from run to run."""
    return {k: v for k, v in executed.items() if "seconds" not in k and k != "crash_site"}


def _device(executed: Mapping[str, Any]) -> str:
    adapter = executed.get("adapter")
    if adapter:
        return f"GPU {adapter.get('name')}"
    return f"CPU {platform.machine()} {platform.processor() or ''} x{os.cpu_count()}".strip()


def _latency(report: ValidateReport) -> dict[str, Any]:
    runners = {}
    for r in report.runners:
        if r.ok and r.infer_seconds:
            runners[r.runner] = {
                "device": _device(r.executed),
                "compile_seconds": r.compile_seconds,
                "infer_seconds": r.infer_seconds,
                "infer_median_seconds": statistics.median(r.infer_seconds),
            }
    return {"schema": "tflkit.baseline-latency/1", "runners": runners}


def _adapter(report: ValidateReport, residency: Mapping[str, Any]) -> str | None:
    probe = residency.get("probe")
    if probe and probe.get("adapter"):
        return probe["adapter"]
    for r in report.runners:
        adapter = r.executed.get("adapter")
        if adapter:
            return adapter.get("name")
    return None


def _generated(model: Any, options: RecordOptions) -> tuple[list[Any], str]:
    """The input sets ``options`` make for ``model`` and where they came from."""
    sets = options.make_sets(model)
    source = (
        f"file:{options.inputs.name}"
        if options.inputs is not None
        else f"{sets.source} (seed {options.seed})"
    )
    if sets.source.startswith("images:"):
        source = f"images:{Path(sets.source[7:]).name}"
    return list(sets.feeds), source


def _runner_entries(
    report: Any, outs: Mapping[str, Any], options: RecordOptions
) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]]]:
    """Per runner: its manifest entry (status, what executed, tolerance, outputs kept) and its
    outputs stacked over the input sets."""
    entries: dict[str, Any] = {}
    outputs: dict[str, dict[str, np.ndarray]] = {}
    for result in report.runners:
        kept: dict[str, np.ndarray] = {}
        if result.ok:
            for name in outs:
                if all(name in o for o in result.outputs):
                    kept[name] = np.stack([np.asarray(o[name]) for o in result.outputs])
        outputs[result.runner] = kept
        entries[result.runner] = {
            "status": result.status,
            "error": result.error,
            "executed": _executed(result.executed),
            "tolerance": stored_tolerance(runner_tolerance(result.runner, options.tolerances)),
            "outputs": sorted(kept),
            "unreadable": dict(result.unreadable),
        }
    return entries, outputs


def _run(
    path: Path,
    feeds: Sequence[Mapping[str, np.ndarray]],
    runners: Sequence[str],
    key: Any,
    options: RecordOptions,
) -> Any:
    """The runs to record: tflkit's own runners, or those of ``options.runtime``."""
    if options.runtime is None:
        return run_models(
            path,
            feeds,
            runners,
            signature=key,
            input_shapes=options.input_shapes,
            delegate=options.delegate,
            timeout=options.timeout,
        )
    from types import SimpleNamespace

    from tflkit.harness.runtimes import run_in_runtime

    runs = run_in_runtime(
        path, feeds, runners, options.runtime, signature=key, timeout=options.timeout
    )
    return SimpleNamespace(runners=runs)


def record(
    model_path: str | os.PathLike[str],
    options: RecordOptions | None = None,
    *,
    feeds: Sequence[Mapping[str, np.ndarray]] | None = None,
    input_source: str | None = None,
) -> Baseline:
    """Run and snapshot the model; ``feeds`` (from an older baseline) replace the generated sets.

    Raises :class:`UsageError` for bad options or inputs; a runner that fails is recorded with
    its status (a later check then compares nothing for it), never raised.
    """
    from tflkit import ir
    from tflkit.ir.entry import entry_point
    from tflkit.regress.residency import snapshot

    options = options or RecordOptions()
    path = Path(model_path)
    runners = check_runners(options.runners, options.delegate)
    data, label = ir.serde.read_model_bytes(path)
    model = ir.load(data, label=label)
    key, _, _, outs = entry_point(model, options.signature)
    if feeds is None:
        feeds, source = _generated(model, options)
    else:
        source = input_source or "baseline"
    report = _run(path, feeds, runners, key, options)
    residency = snapshot(path, target=options.target, probe=options.probe, timeout=options.timeout)
    histogram = Counter(op.type for sg in model.subgraphs for op in sg.ops)
    runner_entries, outputs = _runner_entries(report, outs, options)
    first = feeds[0]
    manifest: dict[str, Any] = {
        "schema": BASELINE_SCHEMA,
        "model": {
            "file": path.name,
            "sha256": hashlib.sha256(data).hexdigest(),
            "bytes": len(data),
            "ops": sum(histogram.values()),
            "op_histogram": dict(sorted(histogram.items())),
        },
        "signature": key,
        "inputs": {
            "count": len(feeds),
            "source": source,
            "specs": [
                {"name": n, "dtype": str(np.asarray(a).dtype), "shape": list(np.shape(a))}
                for n, a in first.items()
            ],
            "input_shapes": {n: list(s) for n, s in options.input_shapes.items()},
        },
        "outputs": output_specs(outs),
        "runners": runner_entries,
        "residency": residency,
        "options": {
            "probe": options.probe,
            "target": residency["static"]["target"],
            "tolerances": {k: dict(v) for k, v in options.tolerances.items()},
        },
        "versions": versions(_adapter(report, residency)),
    }
    if options.runtime is not None:
        manifest["versions"]["runtime"] = options.runtime.label
    latency = _latency(report) if options.latency else None
    return Baseline(manifest, [dict(f) for f in feeds], outputs, latency)
