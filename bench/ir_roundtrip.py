"""Benchmark: load and save a large ``.tflite`` with tflkit's IR vs LiteRT's ``flatbuffer_utils``.

Run from the repo root: ``PYTHONPATH=. python bench/ir_roundtrip.py``. The large synthetic model
(``bench/large_model.py``) is generated once into the cache directory. Every measurement runs in
a fresh subprocess, so its peak RSS (``ru_maxrss``) belongs to that task alone; each is repeated
and the median reported, as seconds, as a ratio to the anchor (reading the file's bytes, page
cache warm) and as peak RSS. A benchmark, not a test: nothing here asserts on time.
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
#: (task, what it times). "read" is the anchor every ratio is relative to.
TASKS = (
    ("read", "Path.read_bytes (anchor)"),
    ("ir.load", "tflkit ir.load"),
    ("structure", "tflkit structural verifier alone (part of ir.load)"),
    ("ir.save", "tflkit ir.save of the loaded model"),
    ("fbu.read_model", "flatbuffer_utils.read_model"),
    ("fbu.write_model", "flatbuffer_utils.write_model of the read model"),
)


# --------------------------------------------------------------------------------------------
# worker: one task in a fresh process
# --------------------------------------------------------------------------------------------
def _prepare(task: str, model: Path) -> Callable[[Path], Any]:
    """Imports and untimed set-up for ``task``; returns the timed call (taking an output path)."""
    if task == "read":
        return lambda _out: model.read_bytes()
    if task == "structure":
        from tflkit.ir.structure import verify_bytes

        data = model.read_bytes()
        return lambda _out: verify_bytes(data)
    if task.startswith("ir."):
        from tflkit import ir

        if task == "ir.load":
            return lambda _out: ir.load(model)
        loaded = ir.load(model)
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
    """Run ``task`` once and measure it; the file is read once first so the cache is warm."""
    _warm_page_cache(model)
    call = _prepare(task, model)
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
    rows = []
    with tempfile.TemporaryDirectory(prefix="tflkit-bench-") as out_dir:
        for task, label in TASKS:
            runs = [
                subprocess_json(Path(__file__).resolve(), ["--worker", task, str(model), out_dir])
                for _ in range(repeats)
            ]
            rows.append((task, label, runs))
    anchor = statistics.median(r["seconds"] for r in rows[0][2])

    print(f"model: {model}")
    print(f"size: {info['size_mb']:.1f} MB, ops: {info['ops']:.0f}, buffers: {info['buffers']:.0f}")
    print(f"each task: fresh process, median of {repeats}; ratio = seconds / read anchor")
    header = f"{'task':<16} {'seconds':>8} {'ratio':>7} {'peak RSS MB':>12} {'RSS before MB':>14}"
    print(header)
    print("-" * len(header))
    for task, _label, runs in rows:
        seconds = statistics.median(r["seconds"] for r in runs)
        peak = statistics.median(r["peak_rss_mb"] for r in runs)
        before = statistics.median(r["rss_before_mb"] for r in runs)
        print(f"{task:<16} {seconds:>8.3f} {seconds / anchor:>7.2f} {peak:>12.0f} {before:>14.0f}")
    print()
    for task, label, _runs in rows:
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
