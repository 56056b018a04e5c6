"""Benchmark: tflkit's static GPU check against LiteRT's own analyzer, on the large model.

Run from the repo root: ``PYTHONPATH=. python bench/check_vs_analyzer.py``. The large synthetic
model (``bench/large_model.py``) is generated once into the cache directory shared with
``bench/ir_roundtrip.py``. Each task runs in a fresh subprocess (imports are not timed), three
times by default; the table shows the median and the ratio to LiteRT's analyzer
(``ModelAnalyzer(path, input_is_filepath=True, gpu_compatibility=True)`` from
``ai_edge_litert._pywrap_analyzer_wrapper``, the native function TensorFlow's
``tf.lite.experimental.Analyzer.analyze`` wraps). A benchmark, not a test: nothing here asserts
on time.

The whole-process table times ``tflkit check --json`` against a process that runs the analyzer
(both start an interpreter; the analyzer maps the file and walks it in native code). The
"... on a 1-layer model" row is the same command on the generator's model with one layer (3
ops, the same kinds): the command's fixed cost (interpreter, imports, the CLI's argument
parsing), so the difference is what the large model itself costs. ``check`` maps the model
(weights stay on disk) and hashes the whole file for the report's ``sha256`` on a second thread,
started before anything else. Two more rows take the command apart: "... its sha256 skipped" is
the same command with the hash patched out (an experiment: what the check costs by itself), and
"sha256 of the file alone" a process that only hashes the file with ``hashlib``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ir_roundtrip import ensure_model, subprocess_json

REPO = Path(__file__).resolve().parents[1]
#: (task, what it times). "analyzer" is the anchor every ratio is relative to.
TASKS = (
    ("analyzer", "LiteRT ModelAnalyzer(path, True, gpu_compatibility=True)"),
    ("tflkit", "ir.load + static.analyze + partition.plan_partitions (every subgraph)"),
    ("tflkit.check", "static.analyze of the loaded model"),
    ("tflkit.partition", "partition.plan_partitions of the checked model"),
)


def _prepare(task: str, model: Path) -> Callable[[], Any]:
    """Imports and untimed set-up for ``task``; returns the timed call."""
    if task == "analyzer":
        from ai_edge_litert import _pywrap_analyzer_wrapper as analyzer

        return lambda: analyzer.ModelAnalyzer(str(model), True, True)
    from tflkit import ir
    from tflkit.compat import partition, static

    def plan(loaded: ir.Model, report: static.StaticReport) -> list[partition.PartitionPlan]:
        ok = {(v.subgraph_index, v.op_index): v.ok for v in report.verdicts}
        return [
            partition.plan_partitions(sg, lambda op, i=sg.index: ok[(i, op.index)])
            for sg in loaded.subgraphs
        ]

    if task == "tflkit":

        def everything() -> Any:
            loaded = ir.load(model)
            return plan(loaded, static.analyze(loaded))

        return everything
    loaded = ir.load(model)
    if task == "tflkit.check":
        return lambda: static.analyze(loaded)
    report = static.analyze(loaded)
    return lambda: plan(loaded, report)


def worker(task: str, model: Path) -> dict[str, float]:
    """Run ``task`` once on a warm page cache and time it."""
    model.read_bytes()
    call = _prepare(task, model)
    start = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - start
    size = len(result) if isinstance(result, str) else 0
    return {"seconds": seconds, "output_chars": size}


#: Whole processes, timed from the outside: (name, command). The first is the anchor.
PROCESSES = (
    (
        "analyzer process",
        [
            sys.executable,
            "-c",
            "import sys; from ai_edge_litert import _pywrap_analyzer_wrapper as a; "
            "a.ModelAnalyzer(sys.argv[1], True, True)",
        ],
    ),
    ("tflkit check --json", [sys.executable, "-m", "tflkit", "check", "--json"]),
    (
        "  ... its sha256 skipped",
        [
            sys.executable,
            "-c",
            "import sys; from tflkit import fsio; from tflkit.cli.main import main; "
            "fsio.Sha256Job._run = lambda job, source: setattr(job, '_digest', '0' * 64); "
            "sys.exit(main(['check', '--json', sys.argv[1]]))",
        ],
    ),
    (
        "sha256 of the file alone",
        [
            sys.executable,
            "-c",
            "import hashlib, sys; hashlib.file_digest(open(sys.argv[1], 'rb'), 'sha256')",
        ],
    ),
)


def run_processes(model: Path, small: Path, repeats: int) -> None:
    """Whole-process wall time (start-up, imports, reading, checking, printing), alternating
    the commands so machine load hits them alike; ``small`` gives the command's fixed cost."""
    runs = [(name, [*command, str(model)]) for name, command in PROCESSES]
    runs.append(("  ... on a 1-layer model", [*PROCESSES[1][1], str(small)]))
    samples: dict[str, list[float]] = {name: [] for name, _ in runs}
    for _ in range(repeats):
        for name, command in runs:
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
            samples[name].append(time.perf_counter() - start)
    anchor = statistics.median(samples[PROCESSES[0][0]])
    print(f"whole processes, median of {repeats}; ratio = seconds / analyzer process")
    header = f"{'process':<25} {'seconds':>9} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for name, times in samples.items():
        seconds = statistics.median(times)
        print(f"{name:<25} {seconds:>9.3f} {seconds / anchor:>7.2f}")
    print()


def run(model: Path, small: Path, repeats: int) -> None:
    run_processes(model, small, repeats)
    rows = []
    for task, label in TASKS:
        runs = [
            subprocess_json(Path(__file__).resolve(), ["--worker", task, str(model)])
            for _ in range(repeats)
        ]
        rows.append((task, label, statistics.median(r["seconds"] for r in runs)))
    anchor = rows[0][2]
    print(f"model: {model} ({model.stat().st_size / 1e6:.1f} MB)")
    print(f"each task: fresh process, median of {repeats}; ratio = seconds / analyzer")
    header = f"{'task':<18} {'seconds':>9} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for task, _label, seconds in rows:
        print(f"{task:<18} {seconds:>9.3f} {seconds / anchor:>7.2f}")
    print()
    for task, label, _seconds in rows:
        print(f"  {task:<18} {label}")


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
    parser.add_argument("--worker", nargs=2, metavar=("TASK", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        task, model = args.worker
        print(json.dumps(worker(task, Path(model))))
        return
    model = args.model or ensure_model(args.cache_dir, args.layers)
    run(model, ensure_model(args.cache_dir, 1), args.repeats)


if __name__ == "__main__":
    main()
