"""Ask the real LiteRT GPU accelerator about a model, in a child process, and report what it said.

``probe(model)`` compiles the model on the GPU accelerator (with CPU fallback, so a partly
supported model still compiles and says what it rejected) in ``python -m
tflkit.gpu._probe_worker``, parses the native log with :mod:`tflkit.gpu.log`, and
optionally runs one inference. A crash or a hang of the accelerator is a finding in the returned
:class:`ProbeResult`, never an exception here; for a crash it looks for the op that caused it.
Results are cached on disk by (model sha256, ai-edge-litert version, options).

The jobs live in their own modules: spawning the worker (``spawn``), the result
(``probe_result``), the disk cache (``probe_cache``), crash bisection (``crash``), batch jobs
(``jobs``), signatures as standalone models (``signatures``). This module is the entry point and
re-exports their public names.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tflkit.errors import ModelLoadError, UsageError
from tflkit.gpu import crash
from tflkit.gpu.crash import CrashNotLocated, find_crash_op
from tflkit.gpu.jobs import JobResult, run_jobs
from tflkit.gpu.probe_cache import (
    cache_key,
    cache_load,
    cache_store,
    cacheable,
    default_cache_dir,
    inputs_digest,
    litert_version,
    load_arrays,
    sets_digest,
)
from tflkit.gpu.probe_result import CrashSite, ProbeResult, result_from_state
from tflkit.gpu.signatures import signature_model, signature_order
from tflkit.gpu.spawn import (
    Inputs,
    ModelInput,
    Normalized,
    normalize_inputs,
    read_model,
    spawn_count,
    spawn_probe,
)

__all__ = [
    "CrashNotLocated",
    "CrashSite",
    "JobResult",
    "ProbeResult",
    "default_cache_dir",
    "find_crash_op",
    "probe",
    "probe_many",
    "probe_signatures",
    "run_jobs",
    "signature_model",
    "signature_order",
    "spawn_count",
]


def probe(
    model: ModelInput,
    *,
    timeout: float = 120.0,
    enforce_f32: bool = False,
    run: bool = False,
    inputs: Inputs | None = None,
    seed: int = 0,
    cache_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    locate_crash: bool = True,
    input_sets: Sequence[Inputs] | None = None,
    signature: str | None = None,
) -> ProbeResult:
    """Compile ``model`` (bytes or path) on the GPU accelerator in a child process.

    With ``run=True`` it also runs one inference on ``inputs`` (by name or in signature order)
    or, without them, on inputs drawn from ``seed``; ``result.inputs``/``result.outputs`` hold
    the arrays (int64 outputs cannot be read back: see ``unreadable_outputs``). With
    ``input_sets`` (several inputs, ``run=True``) it runs one inference per set in one compile:
    ``result.output_sets`` and ``result.run_seconds_each`` (write + run + read, per set).
    ``signature`` picks a signature by key (default: the first). Raises
    :class:`~tflkit.errors.ModelLoadError` only for input that is not a TFLite model; every
    accelerator failure, crash or hang is reported in the result.
    """
    _check_arguments(timeout, run, inputs, input_sets)
    data = read_model(model)
    normalized = normalize_inputs(inputs) if run else None
    sets = [normalize_inputs(one) for one in input_sets] if input_sets is not None else None
    options = _options(enforce_f32, run, seed, normalized, sets, signature)
    sha = hashlib.sha256(data).hexdigest()
    version = litert_version()
    entry = default_cache_dir(cache_dir) / cache_key(sha, version, options)
    if use_cache:
        cached = cache_load(entry)
        unlocated = cached is not None and cached.crashed and cached.crash_site is None
        if cached is not None and not (locate_crash and unlocated and cached.crash_note is None):
            return cached

    def sub_model_crashes(sub: bytes, sub_run: bool) -> bool:
        again = probe(
            sub,
            timeout=timeout,
            enforce_f32=enforce_f32,
            run=sub_run,
            cache_dir=cache_dir,
            use_cache=use_cache,
            locate_crash=False,
        )
        return again.crashed

    with tempfile.TemporaryDirectory(prefix="tflkit-probe-") as tmp:
        state, text, code, timed_out, wall, npz = spawn_probe(
            data,
            timeout=timeout,
            enforce_f32=enforce_f32,
            run=run,
            inputs=normalized,
            seed=seed,
            workdir=Path(tmp),
            input_sets=sets,
            signature=signature,
        )
        result = result_from_state(state, text, code, timed_out, wall, sha, version, options)
        if result.log.fatal_kind == "load_failed" and not result.compiled:
            raise ModelLoadError(f"the runtime cannot load this model: {result.error}")
        if result.ran:
            _attach_arrays(result, npz, state)
        if result.crashed and locate_crash and result.stage in ("compile", "run"):
            try:
                result.crash_site = crash.locate_crash(data, result, sub_model_crashes)
            except CrashNotLocated as why:
                result.crash_note = str(why)
        if use_cache and cacheable(result):
            cache_store(entry, result, npz if result.ran else None)
    return result


def _check_arguments(
    timeout: float, run: bool, inputs: Inputs | None, input_sets: Sequence[Inputs] | None
) -> None:
    if timeout <= 0:
        raise UsageError(f"timeout must be positive, got {timeout}")
    if (inputs is not None or input_sets is not None) and not run:
        raise UsageError("inputs are only used with run=True")
    if inputs is not None and input_sets is not None:
        raise UsageError("give inputs or input_sets, not both")


def _attach_arrays(result: ProbeResult, npz: Path, state: dict[str, Any]) -> None:
    """The inputs and outputs of a probe that ran, read back from the worker's ``.npz``."""
    arrays = load_arrays(npz, state)
    result.inputs, result.outputs = arrays["inputs"], arrays["outputs"]
    if "sets" in arrays:
        result.output_sets = list(arrays["sets"].values())


def _options(
    enforce_f32: bool,
    run: bool,
    seed: int,
    normalized: Normalized | None,
    sets: list[Normalized] | None,
    signature: str | None,
) -> dict[str, Any]:
    """The options that make a probe what it is (part of its cache key)."""
    options: dict[str, Any] = {
        "enforce_f32": bool(enforce_f32),
        "run": bool(run),
        "inputs": inputs_digest(normalized),
        "seed": seed if run and normalized is None and sets is None else None,
    }
    if sets is not None:
        options["input_sets"] = sets_digest(sets)
    if signature is not None:
        options["signature"] = signature
    return options


def probe_signatures(
    model: Any,
    *,
    timeout: float = 120.0,
    enforce_f32: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    locate_crash: bool = True,
) -> dict[str, ProbeResult]:
    """:func:`probe` of every signature of ``model`` (an ``ir.Model``) on its own
    (:func:`signature_model`), in :func:`signature_order`: what the accelerator rejects in each,
    whether it crashes compiling it and, for a crash, the op (an index into that signature's
    subgraph). A model with one signature, or none, gives {} (the whole-model probe is that)."""
    if len(model.signatures) < 2:
        return {}
    results = {}
    for key in signature_order(model):
        data, _ = signature_model(model, key)
        results[key] = probe(
            data,
            timeout=timeout,
            enforce_f32=enforce_f32,
            cache_dir=cache_dir,
            use_cache=use_cache,
            locate_crash=locate_crash,
        )
    return results


def probe_many(
    models: Sequence[bytes],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = True,
    timeout_per_model: float = 60.0,
) -> list[ProbeResult]:
    """``probe(model)`` (compile only, default options) for each model, batched by
    :func:`run_jobs`.

    Cached results are reused and new ones stored under the same keys ``probe`` uses. A model
    that crashes or hangs the batch worker is probed again on its own with ``probe``, which
    locates the crashing op. Unlike ``probe``, a model the runtime cannot load is returned as a
    "compile_error" result (not cached), not raised.
    """
    version = litert_version()
    options: dict[str, Any] = {"enforce_f32": False, "run": False, "inputs": None, "seed": None}
    results: list[ProbeResult | None] = [None] * len(models)
    entries: list[Path] = []
    for i, data in enumerate(models):
        read_model(data)  # ModelLoadError for non-TFLite input, like probe()
        sha = hashlib.sha256(data).hexdigest()
        entries.append(default_cache_dir(cache_dir) / cache_key(sha, version, options))
        if use_cache:
            results[i] = cache_load(entries[i])
    todo = [i for i, found in enumerate(results) if found is None]
    batch = run_jobs([models[i] for i in todo], timeout_per_job=timeout_per_model)
    for i, job in zip(todo, batch, strict=True):
        if job.status not in ("ok", "compile_error", "run_error"):
            continue  # crashed, hung or never started: probed alone below
        sha = hashlib.sha256(models[i]).hexdigest()
        wall = job.compile_seconds or 0.0
        result = result_from_state(job.record, job.log, 0, False, wall, sha, version, options)
        loads = result.compiled or result.log.fatal_kind != "load_failed"
        if use_cache and loads and cacheable(result):
            cache_store(entries[i], result, None)
        results[i] = result
    return [
        found if found is not None else probe(data, cache_dir=cache_dir, use_cache=use_cache)
        for found, data in zip(results, models, strict=True)
    ]
