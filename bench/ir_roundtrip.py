"""Benchmark: load and save a large ``.tflite`` with tflkit's IR vs LiteRT's ``flatbuffer_utils``.

Run from the repo root: ``PYTHONPATH=. python bench/ir_roundtrip.py``. The large synthetic model
(``bench/large_model.py``) is generated once into the cache directory. Every measurement runs in
a fresh subprocess, so its peak RSS (``ru_maxrss``) belongs to that task alone; each is repeated
and the median reported, as seconds, as a ratio to its anchor and as peak RSS. A benchmark, not
a test: nothing here asserts on time.

Two anchors, each measured in the same run:

* ``read``: ``Path.read_bytes`` with the page cache warm, for the loading tasks. ``ir.load`` of
  a path maps the file and reads only its tables (weights are paged in when used), so it can
  beat the anchor; ``ir.load+touch`` also touches one byte of every page of every weight, the
  cost of a first use of all of them.
* ``write``: ``tflkit.fsio.write_atomic`` of the model's own bytes (temporary file, write,
  fsync, rename, fsync of the folder), for the saving tasks. ``ir.save`` writes durably through
  the same function, so the ratio is what saving adds to writing those bytes: building the
  tables. The fsync is in both, and a ratio to a read (no disk write) would mostly measure the
  disk. ``flatbuffer_utils.write_model`` does not fsync; its ratio flatters it. fsync times
  vary with what else writes to the disk: ``ir.dumps`` (the same bytes built in memory, against
  the read anchor) shows the serializer's cost without the disk.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GENERATOR = REPO / "bench" / "large_model.py"
#: (task, its anchor, what it times). An anchor row names itself.
TASKS = (
    ("read", "read", "Path.read_bytes (anchor of the loading tasks)"),
    ("ir.load", "read", "tflkit ir.load(path)"),
    ("ir.load+touch", "read", "ir.load, then one byte of every page of every weight"),
    ("structure", "read", "tflkit structural verifier alone (part of ir.load)"),
    ("fbu.read_model", "read", "flatbuffer_utils.read_model"),
    ("ir.dumps", "read", "tflkit ir.dumps of the loaded model: the file's bytes, in memory"),
    ("write", "write", "fsio.write_atomic of the model's bytes (anchor of the saving tasks)"),
    ("ir.save", "write", "tflkit ir.save of the loaded model (fsio.write_atomic)"),
    ("fbu.write_model", "write", "flatbuffer_utils.write_model of the read model (no fsync)"),
)
#: Page size for ``ir.load+touch``.
_PAGE = 4096


# --------------------------------------------------------------------------------------------
# worker: one task in a fresh process
# --------------------------------------------------------------------------------------------
def _prepare(task: str, model: Path) -> Callable[[Path], Any]:
    """Imports and untimed set-up for ``task``; returns the timed call (taking an output path)."""
    if task == "read":
        return lambda _out: model.read_bytes()
    if task == "write":
        from tflkit.fsio import write_atomic

        data = model.read_bytes()
        return lambda out: write_atomic(out, data)
    if task == "structure":
        from tflkit.ir.structure import verify_bytes

        data = model.read_bytes()
        return lambda _out: verify_bytes(data)
    if task.startswith("ir."):
        # Imports stay untimed: reading a model no longer imports numpy and the generated
        # schema, but touching its data and saving it do.
        import numpy  # noqa: F401

        from tflkit import ir
        from tflkit.ir import _writer  # noqa: F401

        assert ir.schema.fb is not None

        if task == "ir.load":
            return lambda _out: ir.load(model)
        if task == "ir.load+touch":

            def load_and_touch(_out: Path) -> int:
                loaded = ir.load(model)
                return sum(int(b.data[::_PAGE].sum()) for b in loaded.buffers if b.nbytes)

            return load_and_touch
        loaded = ir.load(model)
        if task == "ir.dumps":
            return lambda _out: ir.dumps(loaded)
        return lambda out: ir.save(loaded, out)
    from ai_edge_litert.tools import flatbuffer_utils

    if task == "fbu.read_model":
        return lambda _out: flatbuffer_utils.read_model(model)
    model_t = flatbuffer_utils.read_model(model)
    return lambda out: flatbuffer_utils.write_model(model_t, out)


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _warm_page_cache(model: Path, chunk: int = 8 << 20) -> None:
    """Read the file once through a small reused buffer (warm cache, no RSS spike)."""
    buffer = bytearray(chunk)
    with open(model, "rb", buffering=0) as f:
        while f.readinto(buffer):
            pass


def worker(task: str, model: Path, out_dir: Path) -> dict[str, float]:
    """Run ``task`` once and measure it; the file is read once first so the cache is warm, and
    what earlier tasks left to write back is flushed (a task's fsync waits for it otherwise)."""
    _warm_page_cache(model)
    call = _prepare(task, model)
    os.sync()
    out = out_dir / f"{task}.tflite"
    before = _peak_rss_mb()
    start = time.perf_counter()
    result = call(out)
    seconds = time.perf_counter() - start
    del result
    report = {"seconds": seconds, "rss_before_mb": before, "peak_rss_mb": _peak_rss_mb()}
    if out.exists():
        report["output_mb"] = out.stat().st_size / 1e6
        out.unlink()
    return report


def model_info(model: Path) -> dict[str, float]:
    from tflkit import ir

    loaded = ir.load(model)
    return {
        "size_mb": model.stat().st_size / 1e6,
        "ops": sum(len(sg.ops) for sg in loaded.subgraphs),
        "buffers": len(loaded.buffers),
    }


# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def subprocess_json(script: Path, args: list[str]) -> dict[str, float]:
    """Run a benchmark ``script`` in a fresh interpreter; its last stdout line is JSON."""
    done = subprocess.run(
        [sys.executable, str(script), *args],
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"worker {args[:2]} failed:\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ensure_model(cache_dir: Path, layers: int) -> Path:
    """The large model for ``layers`` (generated once; regenerated if the generator changes)."""
    digest = hashlib.sha256(GENERATOR.read_bytes()).hexdigest()[:12]
    path = cache_dir / f"large-{layers}-{digest}.tflite"
    if not path.is_file():
        cache_dir.mkdir(parents=True, exist_ok=True)
        print(f"generating {path} ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, str(GENERATOR), str(path), "--layers", str(layers)],
            env=_env(),
            check=True,
        )
    return path


def run(model: Path, repeats: int) -> None:
    info = subprocess_json(Path(__file__).resolve(), ["--info", str(model)])
    samples: dict[str, list[dict[str, float]]] = {task: [] for task, _, _ in TASKS}
    with tempfile.TemporaryDirectory(prefix="tflkit-bench-") as out_dir:
        for _ in range(repeats):  # rounds over all tasks: machine load hits them alike
            for task, _anchor, _label in TASKS:
                samples[task].append(
                    subprocess_json(
                        Path(__file__).resolve(), ["--worker", task, str(model), out_dir]
                    )
                )
    seconds = {
        task: statistics.median(r["seconds"] for r in runs) for task, runs in samples.items()
    }

    print(f"model: {model}")
    print(f"size: {info['size_mb']:.1f} MB, ops: {info['ops']:.0f}, buffers: {info['buffers']:.0f}")
    print(f"each task: fresh process, median of {repeats}; ratio = seconds / its anchor's")
    header = (
        f"{'task':<16} {'anchor':>7} {'seconds':>8} {'ratio':>7} {'peak RSS MB':>12} "
        f"{'RSS before MB':>14}"
    )
    print(header)
    print("-" * len(header))
    for task, anchor, _label in TASKS:
        runs = samples[task]
        peak = statistics.median(r["peak_rss_mb"] for r in runs)
        before = statistics.median(r["rss_before_mb"] for r in runs)
        ratio = seconds[task] / seconds[anchor]
        print(
            f"{task:<16} {anchor:>7} {seconds[task]:>8.3f} {ratio:>7.2f} {peak:>12.0f} "
            f"{before:>14.0f}"
        )
    print()
    for task, _anchor, label in TASKS:
        print(f"  {task:<16} {label}")
    print("  RSS before = peak RSS after imports and untimed set-up (the save tasks load first)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="benchmark this .tflite instead")
    parser.add_argument("--layers", type=int, default=800, help="size of the generated model")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "tflkit-bench",
        help="where the generated model is kept between runs",
    )
    parser.add_argument(
        "--worker", nargs=3, metavar=("TASK", "MODEL", "OUT_DIR"), help=argparse.SUPPRESS
    )
    parser.add_argument("--info", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        task, model, out_dir = args.worker
        print(json.dumps(worker(task, Path(model), Path(out_dir))))
        return
    if args.info:
        print(json.dumps(model_info(args.info)))
        return
    model = args.model or ensure_model(args.cache_dir, args.layers)
    run(model, args.repeats)


if __name__ == "__main__":
    main()
