"""Ask the real LiteRT GPU accelerator about a model, in a child process, and report what it said.

``probe(model)`` compiles the model on the GPU accelerator (with CPU fallback, so a partly
supported model still compiles and says what it rejected) in ``python -m
tflkit.gpu._probe_worker``, parses the native log with :mod:`tflkit.gpu.log`, and
optionally runs one inference. A crash or a hang of the accelerator is a finding in the returned
:class:`ProbeResult`, never an exception here; for a crash it looks for the op that caused it.
Results are cached on disk by (model sha256, ai-edge-litert version, options).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.errors import ModelLoadError, UsageError
from tflkit.fsio import write_atomic
from tflkit.gpu.log import Adapter, GpuLog, parse_gpu_log
from tflkit.jsonable import plain
from tflkit.proc.worker import run_worker

__all__ = [
    "CrashNotLocated",
    "CrashSite",
    "ProbeResult",
    "default_cache_dir",
    "find_crash_op",
    "probe",
    "probe_signatures",
    "run_jobs",
    "signature_model",
    "signature_order",
    "spawn_count",
]

PROTOCOL = 1
_WORKER = "tflkit.gpu._probe_worker"
#: the line the batch worker prints before each job (tflkit.gpu._probe_worker.JOB_MARKER)
JOB_MARKER = "tflkit-probe: job "
_FILE_IDENTIFIER = b"TFL3"

ModelInput = bytes | bytearray | memoryview | str | os.PathLike[str]
Inputs = Mapping[str, np.ndarray] | Sequence[np.ndarray]


@dataclass
class CrashSite:
    """The op whose inclusion makes the accelerator crash.

    ``op_index`` indexes ``model.main.ops``. ``method`` is "message" when the crash message's
    hint was confirmed by two compiles, "bisect" when prefixes of the op list were bisected.
    ``isolated`` says whether the op alone (cut out with ``ir.extract_model([op])``) also crashes.
    """

    op_index: int
    op_type: str
    method: str
    compiles: int
    isolated: bool | None = None


@dataclass
class ProbeResult:
    """What the GPU accelerator did with one model.

    ``status``: "ok" (compiled, and ran if asked), "compile_error" (the runtime refused, e.g. a
    dynamic shape or no adapter), "run_error" (compiled, inference raised), "crashed" (the
    process died: see ``exit_code``/``signal``/``log.fatal``/``crash_site``), "timeout",
    "worker_error" (the child never started its work: a broken install, see ``error``).
    """

    status: str
    compiled: bool
    is_fully_accelerated: bool
    log: GpuLog
    log_text: str
    model_sha256: str
    litert_version: str
    options: dict[str, Any]
    exit_code: int | None = None
    signal: str | None = None
    timed_out: bool = False
    stage: str | None = None
    error: str | None = None
    compile_seconds: float | None = None
    wall_seconds: float = 0.0
    num_ops: int | None = None
    signature: str | None = None
    input_specs: list[dict[str, Any]] = field(default_factory=list)
    output_specs: list[dict[str, Any]] = field(default_factory=list)
    ran: bool = False
    run_seconds: float | None = None
    run_seconds_each: list[float] = field(default_factory=list)
    inputs: dict[str, np.ndarray] | None = None
    outputs: dict[str, np.ndarray] | None = None
    output_sets: list[dict[str, np.ndarray]] | None = None
    unreadable_outputs: dict[str, str] = field(default_factory=dict)
    crash_site: CrashSite | None = None
    crash_note: str | None = None
    worker_pid: int | None = None
    from_cache: bool = False

    @property
    def crashed(self) -> bool:
        """The accelerator took the process down."""
        return self.status == "crashed"

    @property
    def adapter(self) -> Adapter | None:
        """The GPU adapter the accelerator selected, if it got that far."""
        return self.log.adapter

    @property
    def exit_description(self) -> str | None:
        """'killed by SIGABRT', 'exit status 1', or None for a clean exit."""
        if self.signal:
            return f"killed by {self.signal}"
        if self.exit_code:
            return f"exit status {self.exit_code}"
        return None

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-ready form without the arrays (those go to a sibling .npz in the cache)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        del data["inputs"], data["outputs"], data["output_sets"]
        data["log"] = self.log.to_dict()
        data["crash_site"] = plain(self.crash_site)
        return data

    @classmethod
    def from_json_dict(
        cls, data: dict[str, Any], arrays: dict[str, dict[str, np.ndarray]] | None
    ) -> ProbeResult:
        """Rebuild from :meth:`to_json_dict` plus the arrays stored beside it."""
        data = dict(data)
        data["log"] = GpuLog.from_dict(data["log"])
        if data.get("crash_site") is not None:
            data["crash_site"] = CrashSite(**data["crash_site"])
        arrays = arrays or {}
        sets = arrays.get("sets")
        return cls(
            **data,
            inputs=arrays.get("inputs"),
            outputs=arrays.get("outputs"),
            output_sets=list(sets.values()) if sets else None,
        )


class _Spawns:
    """Counts worker processes started by this process (lets tests see a cache hit)."""

    count = 0


def spawn_count() -> int:
    """How many probe worker processes this process has started."""
    return _Spawns.count


def default_cache_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The probe cache directory: ``cache_dir`` when given, else ``~/.cache/tflkit/probe``."""
    if cache_dir is not None:
        return Path(cache_dir)
    return Path.home() / ".cache" / "tflkit" / "probe"


def litert_version() -> str:
    """Installed ai-edge-litert version, part of every cache key."""
    try:
        return importlib.metadata.version("ai-edge-litert")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _read_model(model: ModelInput) -> bytes:
    if isinstance(model, bytes | bytearray | memoryview):
        data = bytes(model)
        where = "model bytes"
    else:
        path = Path(model)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ModelLoadError(f"cannot read model {path}: {exc.strerror or exc}") from exc
        where = str(path)
    if len(data) < 8 or data[4:8] != _FILE_IDENTIFIER:
        raise ModelLoadError(f"{where} is not a TFLite model (no 'TFL3' flatbuffer identifier)")
    return data


def _normalize_inputs(inputs: Inputs | None) -> tuple[list[np.ndarray], list[str] | None] | None:
    if inputs is None:
        return None
    if isinstance(inputs, Mapping):
        names = [str(k) for k in inputs]
        return [np.ascontiguousarray(inputs[k]) for k in inputs], names
    if isinstance(inputs, np.ndarray):
        raise UsageError("inputs must be a sequence or a name->array mapping, not one array")
    return [np.ascontiguousarray(a) for a in inputs], None


def _inputs_digest(normalized: tuple[list[np.ndarray], list[str] | None] | None) -> str | None:
    if normalized is None:
        return None
    h = hashlib.sha256()
    arrays, names = normalized
    h.update(json.dumps(names).encode())
    for a in arrays:
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _sets_digest(sets: list[tuple[list[np.ndarray], list[str] | None]] | None) -> str | None:
    if sets is None:
        return None
    return hashlib.sha256("".join(str(_inputs_digest(one)) for one in sets).encode()).hexdigest()


def _cache_key(sha: str, version: str, options: dict[str, Any]) -> str:
    blob = json.dumps(
        {"protocol": PROTOCOL, "model": sha, "litert": version, **options}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def _cache_load(entry: Path) -> ProbeResult | None:
    meta = entry.with_suffix(".json")
    if not meta.is_file():
        return None
    try:
        data = json.loads(meta.read_text())
        arrays = _load_arrays(entry.with_suffix(".npz"), data) if data.get("ran") else None
        result = ProbeResult.from_json_dict(data, arrays)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    result.from_cache = True
    return result


def _cache_store(entry: Path, result: ProbeResult, npz: Path | None) -> None:
    """Arrays first, then the JSON that makes the entry visible to readers."""
    if npz is not None and npz.is_file():
        data = npz.read_bytes()
        write_atomic(entry.with_suffix(".npz"), data)
    write_atomic(entry.with_suffix(".json"), json.dumps(result.to_json_dict(), sort_keys=True))


def _load_arrays(npz: Path, state: dict[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    specs_in = state.get("input_specs") or state.get("inputs") or []
    specs_out = state.get("output_specs") or state.get("outputs") or []
    result: dict[str, Any] = {"inputs": {}, "outputs": {}}
    if not npz.is_file():
        return result
    with np.load(npz, allow_pickle=False) as data:
        count = state.get("sets") or 0
        if count:
            result["sets"] = {
                k: {
                    spec["name"]: data[f"s{k}_out_{i}"]
                    for i, spec in enumerate(specs_out)
                    if f"s{k}_out_{i}" in data.files
                }
                for k in range(count)
            }
        for i, spec in enumerate(specs_in):
            if f"in_{i}" in data.files:
                result["inputs"][spec["name"]] = data[f"in_{i}"]
        for i, spec in enumerate(specs_out):
            if f"out_{i}" in data.files:
                result["outputs"][spec["name"]] = data[f"out_{i}"]
    return result


def _spawn(
    data: bytes,
    *,
    timeout: float,
    enforce_f32: bool,
    run: bool,
    inputs: tuple[list[np.ndarray], list[str] | None] | None,
    seed: int,
    workdir: Path,
    input_sets: list[tuple[list[np.ndarray], list[str] | None]] | None = None,
    signature: str | None = None,
) -> tuple[dict[str, Any], str, int | None, bool, float, Path]:
    """Run the worker; return (last state, merged log, return code, timed out, wall s, npz)."""
    model_path = workdir / "model.tflite"
    model_path.write_bytes(data)
    result_path = workdir / "result.json"
    npz_path = workdir / "outputs.npz"
    cmd = [
        sys.executable,
        "-m",
        _WORKER,
        "--model",
        str(model_path),
        "--result",
        str(result_path),
        "--outputs",
        str(npz_path),
        "--seed",
        str(seed),
    ]
    if enforce_f32:
        cmd.append("--enforce-f32")
    if run:
        cmd.append("--run")
    if inputs is not None:
        arrays, names = inputs
        in_path = workdir / "inputs.npz"
        np.savez(in_path, **{f"in_{i}": a for i, a in enumerate(arrays)})
        cmd += ["--inputs", str(in_path)]
        if names is not None:
            cmd += ["--input-names", json.dumps(names)]
    if input_sets is not None:
        sets_path = workdir / "input_sets.npz"
        np.savez(
            sets_path,
            **{
                f"s{k}_in_{i}": a
                for k, (arrays, _) in enumerate(input_sets)
                for i, a in enumerate(arrays)
            },
        )
        cmd += ["--input-sets", str(sets_path)]
        if input_sets and input_sets[0][1] is not None:
            cmd += ["--input-names", json.dumps(input_sets[0][1])]
    if signature is not None:
        cmd += ["--signature", signature]
    return _communicate(cmd, workdir, timeout, result_path, npz_path)


def _communicate(
    cmd: list[str], workdir: Path, timeout: float, result_path: Path, npz_path: Path
) -> tuple[dict[str, Any], str, int | None, bool, float, Path]:
    """Start the worker in its own session, wait (killing it on timeout), read its state."""
    finished = run_worker(cmd, cwd=workdir, timeout=timeout)
    _Spawns.count += 1
    try:
        state = json.loads(result_path.read_text())
    except (OSError, ValueError):
        state = {}
    return (
        state,
        finished.output,
        finished.returncode,
        finished.timed_out,
        finished.seconds,
        npz_path,
    )


def _status(state: dict[str, Any], timed_out: bool) -> str:
    if timed_out:
        return "timeout"
    if not state:
        return "worker_error"
    if state.get("stage") != "done":
        return "crashed"
    if not state.get("compiled"):
        return "compile_error"
    if state.get("run_error"):
        return "run_error"
    return "ok"


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
    if timeout <= 0:
        raise UsageError(f"timeout must be positive, got {timeout}")
    if (inputs is not None or input_sets is not None) and not run:
        raise UsageError("inputs are only used with run=True")
    if inputs is not None and input_sets is not None:
        raise UsageError("give inputs or input_sets, not both")
    data = _read_model(model)
    normalized = _normalize_inputs(inputs) if run else None
    sets = [_normalize_inputs(one) for one in input_sets] if input_sets is not None else None
    options: dict[str, Any] = {
        "enforce_f32": bool(enforce_f32),
        "run": bool(run),
        "inputs": _inputs_digest(normalized),
        "seed": seed if run and normalized is None and sets is None else None,
    }
    if sets is not None:
        options["input_sets"] = _sets_digest(sets)  # type: ignore[arg-type]
    if signature is not None:
        options["signature"] = signature
    sha = hashlib.sha256(data).hexdigest()
    version = litert_version()
    entry = default_cache_dir(cache_dir) / _cache_key(sha, version, options)
    if use_cache:
        cached = _cache_load(entry)
        unlocated = cached is not None and cached.crashed and cached.crash_site is None
        if cached is not None and not (locate_crash and unlocated and cached.crash_note is None):
            return cached

    with tempfile.TemporaryDirectory(prefix="tflkit-probe-") as tmp:
        state, text, code, timed_out, wall, npz = _spawn(
            data,
            timeout=timeout,
            enforce_f32=enforce_f32,
            run=run,
            inputs=normalized,
            seed=seed,
            workdir=Path(tmp),
            input_sets=sets,  # type: ignore[arg-type]
            signature=signature,
        )
        result = _result(state, text, code, timed_out, wall, sha, version, options)
        if result.log.fatal_kind == "load_failed" and not result.compiled:
            raise ModelLoadError(f"the runtime cannot load this model: {result.error}")
        if result.ran:
            arrays = _load_arrays(npz, state)
            result.inputs, result.outputs = arrays["inputs"], arrays["outputs"]
            if "sets" in arrays:
                result.output_sets = list(arrays["sets"].values())
        if result.crashed and locate_crash and result.stage in ("compile", "run"):
            try:
                result.crash_site = _locate(
                    data,
                    result,
                    timeout=timeout,
                    enforce_f32=enforce_f32,
                    cache_dir=cache_dir,
                    use_cache=use_cache,
                )
            except CrashNotLocated as why:
                result.crash_note = str(why)
        if use_cache and _cacheable(result):
            _cache_store(entry, result, npz if result.ran else None)
    return result


def _cacheable(result: ProbeResult) -> bool:
    """Timeouts depend on load and a missing adapter on the machine: never cache those."""
    return (
        not result.timed_out
        and result.log.fatal_kind != "no_adapter"
        and (result.log.adapter is not None or result.compiled)
    )


def _result(
    state: dict[str, Any],
    text: str,
    code: int | None,
    timed_out: bool,
    wall: float,
    sha: str,
    version: str,
    options: dict[str, Any],
) -> ProbeResult:
    status = _status(state, timed_out)
    sig = None
    if code is not None and code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
    log = parse_gpu_log(text)
    compiled = bool(state.get("compiled"))
    return ProbeResult(
        status=status,
        compiled=compiled,
        is_fully_accelerated=bool(state.get("fully_accelerated")) and compiled,
        log=log,
        log_text=text,
        model_sha256=sha,
        litert_version=version,
        options=options,
        exit_code=code,
        signal=sig,
        timed_out=timed_out,
        stage=state.get("stage"),
        error=state.get("error") or state.get("run_error") or _last_line(text, status),
        compile_seconds=state.get("compile_seconds"),
        wall_seconds=wall,
        num_ops=state.get("num_ops"),
        signature=state.get("signature"),
        input_specs=state.get("inputs", []),
        output_specs=state.get("outputs", []),
        ran=bool(state.get("ran")),
        run_seconds=state.get("run_seconds"),
        run_seconds_each=state.get("run_seconds_each", []),
        unreadable_outputs=state.get("unreadable", {}),
        worker_pid=state.get("pid"),
    )


def _last_line(text: str, status: str) -> str | None:
    """For a worker that never started: the last thing it printed (e.g. an ImportError)."""
    if status != "worker_error":
        return None
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "the probe worker exited without a word"


class CrashNotLocated(Exception):
    """Why the crashing op could not be found (recorded as ``crash_note``)."""


def find_crash_op(
    ops: Sequence[Any],
    crashes: Callable[[Sequence[Any]], bool],
    *,
    hint: int | None = None,
) -> CrashSite:
    """Find the op whose inclusion crashes the accelerator, over prefixes of ``ops``.

    ``ops`` are a subgraph's ops in execution order (tflkit IR ``Op``); ``crashes(some_ops)``
    compiles a model made of just those ops and says whether it crashed. ``hint`` (the "Node
    N" of a Check-failed message: an id in the delegate's own graph, which equals the op index
    only when no op before it expands to several delegate nodes) is tried first and confirmed
    with two compiles; then the smallest crashing prefix is bisected (about log2(n) compiles).
    The culprit is the last op of that prefix; ``isolated`` says whether it crashes alone.
    """
    ops = list(ops)
    if not ops:
        raise CrashNotLocated("the main subgraph has no ops")
    seen: dict[int, bool] = {0: False}
    compiles = 0

    def prefix_crashes(k: int) -> bool:
        nonlocal compiles
        if k not in seen:
            compiles += 1
            seen[k] = crashes(ops[:k])
        return seen[k]

    lo, hi = 0, len(ops)  # invariant: prefix lo does not crash, prefix hi does (checked below)
    method = "bisect"
    if hint is not None and 0 <= hint < len(ops):
        if prefix_crashes(hint + 1):
            hi = hint + 1
            if prefix_crashes(hint):
                hi = hint
            else:
                lo, method = hint, "message"
        else:
            lo = hint + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if prefix_crashes(mid):
            hi = mid
        else:
            lo = mid
    if not prefix_crashes(hi):
        raise CrashNotLocated(
            "the main subgraph's ops, cut out on their own, do not crash: "
            "the crash needs more than the main subgraph"
        )
    op = ops[hi - 1]
    compiles += 1
    isolated = crashes([op])
    return CrashSite(
        op_index=hi - 1, op_type=op.type, method=method, compiles=compiles, isolated=isolated
    )


def _locate(
    data: bytes,
    result: ProbeResult,
    *,
    timeout: float,
    enforce_f32: bool,
    cache_dir: str | os.PathLike[str] | None,
    use_cache: bool,
) -> CrashSite:
    """Bisect the crash with the IR: every candidate is a sub-model from ``model.extract``."""
    from tflkit import ir

    try:
        model = ir.load(data)
    except Exception as exc:  # best effort: the crash finding stands without a site
        raise CrashNotLocated(f"tflkit.ir cannot load the model: {exc}") from exc
    run = result.stage == "run"  # a crash during inference needs inference to reproduce

    def crashes(ops: Sequence[Any]) -> bool:
        try:
            sub = ir.dumps(ir.extract_model(ops))
        except Exception as exc:
            raise CrashNotLocated(f"cannot cut ops {ops[0].index}..{ops[-1].index}: {exc}") from exc
        sub_result = probe(
            sub,
            timeout=timeout,
            enforce_f32=enforce_f32,
            run=run,
            cache_dir=cache_dir,
            use_cache=use_cache,
            locate_crash=False,
        )
        return sub_result.crashed

    return find_crash_op(model.main.ops, crashes, hint=result.log.fatal_node)


def signature_model(model: Any, key: str) -> tuple[bytes, dict[str, str]]:
    """Signature ``key`` of ``model`` (an ``ir.Model``) as a standalone model: its subgraph as
    subgraph 0 (the subgraphs its ops name, such as composites' decompositions, copied along;
    op indices unchanged), and its signature input names -> the standalone model's (tensor
    names).

    The probe's crash bisection and localization work on subgraph 0, so a signature that is
    not subgraph 0 (``decode`` of an LLM graph) goes through this. A zero-element tensor with no
    producer that the signature does not take (an empty constant, e.g. the shape of a RESHAPE to
    a scalar) stays in the graph, not an input: the accelerator cannot bind an empty input.
    """
    from tflkit import ir

    signature = model.signature(key)
    sub = ir.extract_model(signature.subgraph.ops, signature_key=key)
    graph, sig = sub.main, sub.signatures[0]
    taken = {t.name for t in signature.inputs.values()}
    empty = {id(t) for t in graph.inputs if 0 in tuple(t.shape) and t.name not in taken}
    graph.inputs = [t for t in graph.inputs if id(t) not in empty]
    sig.inputs = {k: t for k, t in sig.inputs.items() if id(t) not in empty}
    kept = {t.name for t in graph.inputs}
    names = {k: t.name for k, t in signature.inputs.items() if t.name in kept}
    return ir.dumps(sub), names


def signature_order(model: Any) -> list[str]:
    """``model``'s signature keys, an LLM graph's ``decode`` first (the one that runs once per
    token), the others in file order."""
    keys = [s.key for s in model.signatures]
    first = [k for k in keys if k == "decode" or k.startswith("decode_")]
    return first + [k for k in keys if k not in first]


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


@dataclass
class JobResult:
    """One model of a :func:`run_jobs` batch: "ok", "compile_error", "run_error", "crashed",
    "timeout" or "worker_error"; ``outputs`` by output name when it ran; ``log`` is what the
    accelerator printed for this job and ``record`` the worker's state for it."""

    status: str
    compiled: bool = False
    fully_accelerated: bool = False
    error: str | None = None
    compile_seconds: float | None = None
    run_seconds: float | None = None
    outputs: dict[str, np.ndarray] | None = None
    unreadable: dict[str, str] = field(default_factory=dict)
    log: str = ""
    record: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float = 0.0


def run_jobs(
    models: Sequence[bytes],
    inputs: Sequence[Mapping[str, np.ndarray] | None] | None = None,
    *,
    enforce_f32: bool = False,
    timeout_per_job: float = 60.0,
) -> list[JobResult]:
    """Compile each model (and run it once on its inputs, when given) on the GPU, in as few
    processes as possible.

    One worker runs the jobs in order; when the accelerator kills it (or a job hangs), that job
    is recorded as "crashed" (or "timeout") and a new worker resumes with the next job. With
    ``inputs`` None every job only compiles. Used to run every op of a model cut out on its own,
    and to probe a corpus, without paying a process start per model.
    """
    feeds = list(inputs) if inputs is not None else [None] * len(models)
    if len(models) != len(feeds):
        raise UsageError(f"{len(models)} models but {len(feeds)} input sets")
    results: dict[int, JobResult] = {}
    with tempfile.TemporaryDirectory(prefix="tflkit-jobs-") as tmp:
        work = Path(tmp)
        jobs: list[dict[str, Any]] = []
        for i, (data, feed) in enumerate(zip(models, feeds, strict=True)):
            (work / f"m{i}.tflite").write_bytes(data)
            job: dict[str, Any] = {"model": str(work / f"m{i}.tflite")}
            if feed is not None:
                np.savez(work / f"i{i}.npz", **{f"in_{k}": a for k, a in enumerate(feed.values())})
                job.update(
                    inputs=str(work / f"i{i}.npz"),
                    outputs=str(work / f"o{i}.npz"),
                    names=[str(name) for name in feed],
                )
            jobs.append(job)
        jobs_path = work / "jobs.json"
        jobs_path.write_text(json.dumps(jobs))
        start = 0
        while start < len(jobs):
            result_path = work / f"state{start}.json"
            cmd = [sys.executable, "-m", _WORKER, "--jobs", str(jobs_path)]
            cmd += ["--result", str(result_path), "--start", str(start)]
            if enforce_f32:
                cmd.append("--enforce-f32")
            timeout = timeout_per_job * (len(jobs) - start)
            state, text, _code, timed_out, _wall, _ = _communicate(
                cmd, work, timeout, result_path, work / "unused.npz"
            )
            logs = _split_job_logs(text)
            for key, record in state.get("jobs", {}).items():
                index = int(key)
                outputs = jobs[index].get("outputs")
                results[index] = _job_result(
                    record, Path(outputs) if outputs else None, logs.get(index, "")
                )
            if state.get("stage") == "done":
                break
            current = state.get("current")
            if current is None:
                error = _last_line(text, "worker_error")
                for i in range(start, len(jobs)):
                    results.setdefault(i, JobResult(status="worker_error", error=error))
                break
            fatal = parse_gpu_log(logs.get(current, text)).fatal
            results[current] = JobResult(
                status="timeout" if timed_out else "crashed",
                error=fatal or ("timed out" if timed_out else "the accelerator killed the process"),
                log=logs.get(current, ""),
            )
            start = current + 1
    return [results.get(i, JobResult(status="worker_error")) for i in range(len(jobs))]


def _split_job_logs(text: str) -> dict[int, str]:
    """The worker's merged log cut at its ``JOB_MARKER`` lines: job index -> its lines."""
    pieces: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(JOB_MARKER):
            current = pieces.setdefault(int(line[len(JOB_MARKER) :].split()[0]), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v) + "\n" for k, v in pieces.items()}


def _job_result(record: dict[str, Any], npz: Path | None, log: str) -> JobResult:
    result = JobResult(
        status="ok",
        compiled=bool(record.get("compiled")),
        fully_accelerated=bool(record.get("fully_accelerated")),
        error=record.get("error") or record.get("run_error"),
        compile_seconds=record.get("compile_seconds"),
        run_seconds=record.get("run_seconds"),
        unreadable=record.get("unreadable", {}),
        log=log,
        record=record,
    )
    if not result.compiled:
        result.status = "compile_error"
    elif record.get("run_error"):
        result.status = "run_error"
    if npz is not None and npz.is_file():
        specs = record.get("outputs", [])
        with np.load(npz, allow_pickle=False) as data:
            result.outputs = {
                spec["name"]: data[f"out_{i}"]
                for i, spec in enumerate(specs)
                if f"out_{i}" in data.files
            }
    return result


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
        _read_model(data)  # ModelLoadError for non-TFLite input, like probe()
        sha = hashlib.sha256(data).hexdigest()
        entries.append(default_cache_dir(cache_dir) / _cache_key(sha, version, options))
        if use_cache:
            results[i] = _cache_load(entries[i])
    todo = [i for i, found in enumerate(results) if found is None]
    batch = run_jobs([models[i] for i in todo], timeout_per_job=timeout_per_model)
    for i, job in zip(todo, batch, strict=True):
        if job.status not in ("ok", "compile_error", "run_error"):
            continue  # crashed, hung or never started: probed alone below
        sha = hashlib.sha256(models[i]).hexdigest()
        wall = job.compile_seconds or 0.0
        result = _result(job.record, job.log, 0, False, wall, sha, version, options)
        loads = result.compiled or result.log.fatal_kind != "load_failed"
        if use_cache and loads and _cacheable(result):
            _cache_store(entries[i], result, None)
        results[i] = result
    return [
        found if found is not None else probe(data, cache_dir=cache_dir, use_cache=use_cache)
        for found, data in zip(results, models, strict=True)
    ]
