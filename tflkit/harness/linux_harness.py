"""tflkit's Linux device harness: run one job folder with LiteRT and write the result folder.

This file is pushed to the device next to the job and run there with the device's Python; it
needs only the standard library, numpy and ai-edge-litert (never tflkit). Protocol:
``android_harness/PROTOCOL.md``.

    python3 linux_harness.py run JOB_DIR RESULT_DIR

``run`` runs each backend of the job in its own child process (the GPU accelerator can abort its
process) with the job's timeout, captures the runtime's native log, and writes RESULT_DIR with
``result.json`` written last (its presence means the result is complete). While it works it prints
``tflkit-harness: ...`` progress lines and a heartbeat, so when the connection to the host drops
the next write fails and the harness stops its children and exits instead of running on.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    import numpy as np
except ImportError:  # say it in one line: the host shows it as the device's error
    print(
        f"tflkit-harness: error: {sys.executable} has no numpy: run `tflkit device setup DEVICE` "
        "on the host (a venv with numpy and ai-edge-litert, no network needed here), or give "
        "--device-python with a Python that has them",
        file=sys.stderr,
    )
    sys.exit(2)

HARNESS_VERSION = "1"
JOB_SCHEMA = "tflkit.device-job/1"
RESULT_SCHEMA = "tflkit.device-result/1"
BACKENDS = ("cpu", "gpu_fp16", "gpu_fp32", "gpu_delegate")
#: the backends that need the GPU API (every one but the CPU's)
GPU_BACKENDS = BACKENDS[1:]
DTYPES = ("int8", "uint8", "int16", "int32", "int64", "bool", "float16", "float32")
EXIT_BAD_JOB = 2
EXIT_HOST_GONE = 4
HEARTBEAT_SECONDS = 2.0

_SUMMARY = re.compile(
    r"(\d+) operations will run on the GPU, and the remaining (\d+) operations will run on the CPU"
)
_SUMMARY_NONE = re.compile(r"No operations will run on the GPU, and all (\d+) operations")
_ADAPTER = re.compile(
    r"Selected adapter: (?P<name>.*?), arch=[^,]*, vendor=(?P<vendor>[^,]*), "
    r"backend=(?P<backend>[^,]*), adapterType=(?P<type>.*)$",
    re.MULTILINE,
)
_FATAL = re.compile(r"^(?:F\d{4} [^\]]*\] ?|FATAL: )(.*)$", re.MULTILINE)


class HostGone(Exception):
    """Writing to the host failed: the connection (ssh, adb) is gone."""


def say(message: str) -> None:
    """A progress line for the host; raises HostGone when nobody reads any more."""
    try:
        sys.stdout.write(f"tflkit-harness: {message}\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError) as exc:
        raise HostGone(str(exc)) from None


def write_json(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


# -- the job ------------------------------------------------------------------------------------


class BadJob(Exception):
    """The job folder does not follow the protocol."""


def load_job(job_dir: Path) -> dict[str, Any]:
    try:
        job = json.loads((job_dir / "job.json").read_text())
    except (OSError, ValueError) as exc:
        raise BadJob(f"cannot read {job_dir / 'job.json'}: {exc}") from None
    if job.get("schema") != JOB_SCHEMA:
        raise BadJob(f"job.json schema is {job.get('schema')!r}; this harness reads {JOB_SCHEMA}")
    unknown = [b for b in job.get("backends", []) if b not in BACKENDS]
    if unknown:
        raise BadJob(f"unknown backend(s) {unknown}; known: {', '.join(BACKENDS)}")
    if not (job_dir / job["model"]["file"]).is_file():
        raise BadJob(f"the model file {job['model']['file']} is missing from the job")
    return job


def read_array(job_dir: Path, entry: dict[str, Any]) -> np.ndarray:
    """One input: ``.npy``, or a raw little-endian buffer described by the entry."""
    path = job_dir / entry["file"]
    dtype, shape = entry["dtype"], tuple(entry["shape"])
    if dtype not in DTYPES:
        raise BadJob(f"{entry['file']}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if path.suffix == ".npy":
        array = np.load(path, allow_pickle=False)
        if array.dtype != np.dtype(dtype) or array.shape != shape:
            raise BadJob(
                f"{entry['file']} holds {array.dtype}{list(array.shape)}, the job says "
                f"{dtype}{list(shape)}"
            )
        return array
    raw = np.fromfile(path, dtype=np.dtype(dtype).newbyteorder("<"))
    if raw.size != int(np.prod(shape, dtype=np.int64)):
        need = int(np.prod(shape, dtype=np.int64))
        raise BadJob(
            f"{entry['file']}: {raw.size} {dtype} values, shape {list(shape)} needs {need}"
        )
    return raw.astype(np.dtype(dtype)).reshape(shape)


def input_sets(job_dir: Path, job: dict[str, Any]) -> list[dict[str, np.ndarray]]:
    return [{e["name"]: read_array(job_dir, e) for e in one} for one in job["input_sets"]]


def save_arrays(
    result_dir: Path, folder: str, sets: list[dict[str, np.ndarray]]
) -> list[list[dict[str, Any]]]:
    """Write ``folder/<set>/<k>.npy`` and return their manifest entries."""
    manifest = []
    for s, arrays in enumerate(sets):
        entries = []
        for k, (name, array) in enumerate(arrays.items()):
            rel = f"{folder}/{s}/{k}.npy"
            path = result_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, np.ascontiguousarray(array), allow_pickle=False)
            entries.append(
                {"name": name, "dtype": array.dtype.name, "shape": list(array.shape), "file": rel}
            )
        manifest.append(entries)
    return manifest


# -- one backend, in a child process -------------------------------------------------------------


def _timed(
    call: Any, feeds: list[dict[str, np.ndarray]], warmup: int, runs: int
) -> tuple[list[float], list[list[float]], list[Any]]:
    warm = []
    for _ in range(warmup):
        start = time.perf_counter()
        call(feeds[0])
        warm.append(time.perf_counter() - start)
    each, values = [], []
    for feed in feeds:
        times = []
        for _ in range(max(runs, 1)):
            start = time.perf_counter()
            out = call(feed)
            times.append(time.perf_counter() - start)
        each.append(times)
        values.append(out)
    return warm, each, values


def _interpreter_class() -> Any:
    """LiteRT's Interpreter, or tflite-runtime's where only that is installed."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        from tflite_runtime.interpreter import Interpreter
    return Interpreter


def runtime_name() -> str:
    """The runtime this Python has: ``ai-edge-litert 2.3.0``, ``tflite-runtime 2.14.0``."""
    found = [
        (d, _version(d)) for d in ("ai-edge-litert", "ai-edge-litert-nightly", "tflite-runtime")
    ]
    return next((f"{d} {v}" for d, v in found if v), "no LiteRT runtime")


def has_gpu_api() -> bool:
    """Whether the runtime has the GPU accelerator API (LiteRT's CompiledModel)."""
    import importlib.util

    find = importlib.util.find_spec  # the parent first: tflite-runtime has no ai_edge_litert
    return find("ai_edge_litert") is not None and find("ai_edge_litert.compiled_model") is not None


def _cpu(model: Path, job: dict[str, Any], feeds: list[dict[str, np.ndarray]], state: dict) -> Any:
    Interpreter = _interpreter_class()

    dump = list(job.get("dump_tensors") or [])
    start = time.perf_counter()
    interpreter = Interpreter(
        model_path=str(model),
        num_threads=job.get("threads"),
        experimental_preserve_all_tensors=bool(dump),
    )
    interpreter.allocate_tensors()
    state["compile_seconds"] = time.perf_counter() - start
    state["ops_total"] = _op_count(interpreter)
    signatures = interpreter.get_signature_list()
    key = job.get("signature")
    if signatures:
        key = key or next(iter(signatures))
        if key not in signatures:
            raise BadJob(f"no signature {key!r}; the model has {list(signatures)}")
        runner = interpreter.get_signature_runner(key)

        def call(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return {k: np.array(v) for k, v in runner(**feed).items()}

    else:
        ins = {d["name"]: d["index"] for d in interpreter.get_input_details()}
        outs = interpreter.get_output_details()

        def call(feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            for name, array in feed.items():
                interpreter.set_tensor(ins[name], array)
            interpreter.invoke()
            return {d["name"]: np.array(interpreter.get_tensor(d["index"])) for d in outs}

    tensors = {d["name"]: d["index"] for d in interpreter.get_tensor_details()}
    missing = [n for n in dump if n not in tensors]
    if missing:
        raise BadJob(f"dump_tensors names tensors the model does not have: {missing}")

    def call_and_dump(feed: dict[str, np.ndarray]) -> tuple[dict, dict]:
        out = call(feed)
        return out, {n: np.array(interpreter.get_tensor(tensors[n])) for n in dump}

    return call_and_dump


def _op_count(interpreter: Any) -> int | None:
    """Operators in the model, every subgraph, as the runtime counts them."""
    try:
        return len(interpreter._get_ops_details())
    except Exception:
        return None


def _gpu(model: Path, job: dict[str, Any], feeds: list[dict[str, np.ndarray]], state: dict) -> Any:
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator
    from ai_edge_litert.options import GpuOptions, Options

    options = Options(
        hardware_accelerators=HardwareAccelerator.GPU | HardwareAccelerator.CPU,
        gpu_options=GpuOptions(enforce_f32=state["backend"] == "gpu_fp32"),
    )
    start = time.perf_counter()
    cm = CompiledModel.from_file(str(model), options=options)
    state["compile_seconds"] = time.perf_counter() - start
    state["fully_accelerated"] = bool(cm.is_fully_accelerated())
    from ai_edge_litert.interpreter import Interpreter

    counter = Interpreter(model_path=str(model))
    counter.allocate_tensors()
    state["ops_total"] = _op_count(counter)
    signatures = cm.get_signature_list()
    key = job.get("signature") or next(iter(signatures))
    if key not in signatures:
        raise BadJob(f"no signature {key!r}; the model has {list(signatures)}")
    index = cm.get_signature_index(key)
    names = signatures[key]
    in_details = cm.get_input_tensor_details(key)
    out_details = cm.get_output_tensor_details(key)
    unreadable: dict[str, str] = state.setdefault("unreadable", {})

    def call(feed: dict[str, np.ndarray]) -> tuple[dict, dict]:
        ins = cm.create_input_buffers(index)
        outs = cm.create_output_buffers(index)
        for buf, name in zip(ins, names["inputs"], strict=True):
            value = np.ascontiguousarray(feed[name], dtype=in_details[name]["dtype"])
            try:
                buf.write(value)
            except ValueError:  # int64, int16, float64...: the binding refuses the dtype, the
                buf.write(value.reshape(-1).view(np.uint8))  # runtime takes its bytes
        cm.run_by_index(index, ins, outs)
        values = {}
        for buf, name in zip(outs, names["outputs"], strict=True):
            detail = out_details[name]
            shape = [int(d) for d in detail["shape"]]
            try:
                count = int(np.prod(shape, dtype=np.int64))
                values[name] = buf.read(count, np.dtype(detail["dtype"])).reshape(shape)
            except (ValueError, TypeError, RuntimeError) as exc:
                why = " ".join(str(exc).split())
                unreadable[name] = (
                    f"TensorBuffer.read cannot read {np.dtype(detail['dtype'])}: {why}"
                )
        return values, {}

    return call


def run_backend(job_dir: Path, result_dir: Path, work: Path, backend: str) -> int:
    """Child process: compile and run one backend; the state file is rewritten after each stage."""
    state_path = work / f"{backend}.json"
    state: dict[str, Any] = {"backend": backend, "stage": "load"}
    write_json(state_path, state)
    job = load_job(job_dir)
    feeds = input_sets(job_dir, job)
    model = job_dir / job["model"]["file"]
    state["stage"] = "compile"
    write_json(state_path, state)
    try:
        call = (_cpu if backend == "cpu" else _gpu)(model, job, feeds, state)
    except BadJob as exc:
        state.update(stage="done", status="run_error", error=str(exc))
        write_json(state_path, state)
        return 0
    except Exception as exc:
        state.update(stage="done", status="compile_error", error=" ".join(str(exc).split()))
        write_json(state_path, state)
        return 0
    state["stage"] = "run"
    write_json(state_path, state)
    try:
        warm, each, values = _timed(
            call, feeds, int(job.get("warmup_runs", 1)), int(job.get("timed_runs", 1))
        )
    except Exception as exc:
        state.update(stage="done", status="run_error", error=" ".join(str(exc).split()))
        write_json(state_path, state)
        return 0
    state["outputs"] = save_arrays(result_dir, f"outputs/{backend}", [v[0] for v in values])
    if any(v[1] for v in values):
        state["dumps"] = save_arrays(result_dir, f"dumps/{backend}", [v[1] for v in values])
    state.update(stage="done", status="ok", warmup_seconds=warm, run_seconds=each)
    write_json(state_path, state)
    return 0


# -- the parent: one child per backend -----------------------------------------------------------


def _gpu_info(log: str) -> dict[str, Any] | None:
    match = _ADAPTER.search(log)
    if match is None:
        return None
    kind = match["type"].strip()
    return {
        "name": match["name"].strip(),
        "vendor": match["vendor"].strip(),
        "backend": match["backend"].strip(),
        "type": kind,
        "software": "CPU" in kind or "Software" in kind,
    }


def _delegated(log: str, total: int | None, fully: bool | None) -> int | None:
    match = _SUMMARY.search(log)
    if match:
        return int(match[1])
    if _SUMMARY_NONE.search(log):
        return 0
    return total if fully else None


def _wait(child: subprocess.Popen[bytes], start: float, timeout: float, backend: str) -> bool:
    """Wait for a backend's child, saying it still runs every ``HEARTBEAT_SECONDS``; kill its
    session after ``timeout`` (or when this process is interrupted). True when it timed out."""
    beat = start
    try:
        while child.poll() is None:
            now = time.perf_counter()
            if now - start > timeout:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                return True
            if now - beat >= HEARTBEAT_SECONDS:
                say(f"{backend} running ({now - start:.0f} s)")
                beat = now
            time.sleep(0.05)
    except BaseException:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        raise
    return False


def _record(backend: str, state: dict[str, Any], log: str, start: float) -> dict[str, Any]:
    """A backend's record for result.json from its last state and its log."""
    record: dict[str, Any] = {
        "backend": backend,
        "status": state.get("status"),
        "error": state.get("error"),
        "compile_seconds": state.get("compile_seconds"),
        "warmup_seconds": state.get("warmup_seconds", []),
        "run_seconds": state.get("run_seconds", []),
        "fully_accelerated": state.get("fully_accelerated"),
        "ops_total": state.get("ops_total"),
        "ops_delegated": None,
        "delegate_log": log[-20000:],
        "gpu": _gpu_info(log) if backend != "cpu" else None,
        "outputs": state.get("outputs", []),
        "unreadable": state.get("unreadable", {}),
        "dumps": state.get("dumps", []),
        "wall_seconds": time.perf_counter() - start,
    }
    if backend == "cpu":
        record["ops_delegated"] = 0
    else:
        record["ops_delegated"] = _delegated(log, record["ops_total"], record["fully_accelerated"])
    return record


def _crash_error(returncode: int, state: dict[str, Any], log: str) -> str:
    """How a backend's child died, and the last fatal line of its log."""
    fatal = _FATAL.findall(log)
    how = f"killed by signal {-returncode}" if returncode < 0 else f"exit status {returncode}"
    detail = fatal[-1] if fatal else (log.strip().splitlines() or [""])[-1]
    return f"{how} during {state.get('stage')}: {detail}".rstrip(": ")


def _spawn_backend(
    python: str, job_dir: Path, result_dir: Path, work: Path, backend: str, timeout: float
) -> dict[str, Any]:
    """Run one backend's child with a timeout; return its record for result.json."""
    log_path = work / f"{backend}.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    start = time.perf_counter()
    with open(log_path, "wb") as log_file:
        child = subprocess.Popen(
            [
                python,
                os.path.abspath(__file__),
                "_backend",
                str(job_dir),
                str(result_dir),
                str(work),
                backend,
            ],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        timed_out = _wait(child, start, timeout, backend)
    log = log_path.read_text("utf-8", "replace")
    try:
        state = json.loads((work / f"{backend}.json").read_text())
    except (OSError, ValueError):
        state = {"stage": "start"}
    record = _record(backend, state, log, start)
    if timed_out:
        why = f"no result within {timeout:g} s (stage {state['stage']})"
        record.update(status="timeout", error=why)
    elif state.get("stage") != "done":
        record.update(status="crashed", error=_crash_error(child.returncode, state, log))
    if record["status"] != "ok":  # nothing half-written stays in the result folder
        record["outputs"], record["dumps"] = [], []
        for folder in ("outputs", "dumps"):
            shutil.rmtree(result_dir / folder / backend, ignore_errors=True)
    return record


def _version(dist: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:
        return None


def device_info() -> dict[str, Any]:
    uname = platform.uname()
    info: dict[str, Any] = {
        "os": f"{uname.system} {uname.release}",
        "machine": uname.machine,
        "hostname": uname.node,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "litert": _version("ai-edge-litert") or _version("ai-edge-litert-nightly"),
        "cpu_count": os.cpu_count(),
    }
    for path, key in (("/etc/os-release", "distribution"), ("/proc/device-tree/model", "model")):
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            continue
        if key == "distribution":
            names = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
            info[key] = names.get("PRETTY_NAME", "").strip('"')
        else:
            info[key] = text.strip("\x00\n ")
    return info


def run(job_dir: Path, result_dir: Path, python: str) -> int:
    """Run every backend of the job and write RESULT_DIR (result.json last)."""
    start = time.perf_counter()
    import importlib.util

    if not any(importlib.util.find_spec(m) for m in ("ai_edge_litert", "tflite_runtime")):
        print(
            f"tflkit-harness: error: {sys.executable} has no ai-edge-litert: run `tflkit device "
            "setup DEVICE` on the host (a venv with it, no network needed here), or give "
            "--device-python with a Python that has it",
            file=sys.stderr,
        )
        return EXIT_BAD_JOB
    try:
        job = load_job(job_dir)
        input_sets(job_dir, job)
    except BadJob as exc:
        print(f"tflkit-harness: error: {exc}", file=sys.stderr)
        return EXIT_BAD_JOB
    if result_dir.exists() and any(result_dir.iterdir()):
        print(f"tflkit-harness: error: {result_dir} exists and is not empty", file=sys.stderr)
        return EXIT_BAD_JOB
    result_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tflkit-harness-"))
    timeout = float(job.get("timeout_seconds", 300))
    records = []
    try:
        for backend in job["backends"]:
            if backend == "gpu_delegate":
                records.append(
                    {
                        "backend": backend,
                        "status": "unavailable",
                        "error": "the classic GPU delegate is not shipped in ai-edge-litert for "
                        "Linux; use gpu_fp16 or gpu_fp32 (CompiledModel with the GPU accelerator)",
                        "outputs": [],
                    }
                )
                continue
            if backend in GPU_BACKENDS and not has_gpu_api():
                records.append(
                    {
                        "backend": backend,
                        "status": "unavailable",
                        "error": f"{runtime_name()} has no GPU accelerator API (LiteRT's "
                        "CompiledModel): the GPU runners need ai-edge-litert",
                        "outputs": [],
                    }
                )
                continue
            say(f"{backend} starting")
            record = _spawn_backend(python, job_dir, result_dir, work, backend, timeout)
            say(f"{backend} {record['status']}")
            records.append(record)
    except HostGone:
        return EXIT_HOST_GONE
    finally:
        for path in sorted(work.iterdir()):
            path.unlink()
        work.rmdir()
    result = {
        "schema": RESULT_SCHEMA,
        "job_id": job.get("id"),
        "model_sha256": job["model"].get("sha256"),
        "harness": {
            "kind": "linux",
            "version": HARNESS_VERSION,
            "runtime": runtime_name(),
        },
        "device": device_info(),
        "backends": records,
        "wall_seconds": time.perf_counter() - start,
    }
    write_json(result_dir / "result.json", result)
    try:
        say("done")
    except HostGone:
        return EXIT_HOST_GONE
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["_backend"] and len(argv) == 5:
        return run_backend(Path(argv[1]), Path(argv[2]), Path(argv[3]), argv[4])
    if argv[:1] == ["run"] and len(argv) == 3:
        return run(Path(argv[1]).resolve(), Path(argv[2]).resolve(), sys.executable)
    print(__doc__.split("\n\n")[2], file=sys.stderr)
    return EXIT_BAD_JOB


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
