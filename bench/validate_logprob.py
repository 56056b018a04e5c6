"""Benchmark: log-probability differences of healthy runners, the basis of the log-domain check.

Run from the repo root::

    PYTHONPATH=. python bench/validate_logprob.py            # float models with probabilities
    PYTHONPATH=. python bench/validate_logprob.py --input-kind random

For every float (not quantized) model of the real corpus with a probability output (SOFTMAX or
LOGISTIC), ``validate`` runs cpu, cpu-ref, cpu-fp16, gpu-fp16 and gpu-fp32 (realistic inputs by
default) and, per pair and output, the largest log-probability difference is printed (values
clamped to the smallest normal float32, as the comparator does):

- fp32 pairs: as a ratio to ``max(log noise, resolution)`` (the output's own fp32 log noise,
  ``sensitivity.fp32.log_max_abs``, and fp32's eps times max(1, largest |log p|)): the check fails
  above ``NOISE_FACTOR["fp32"]`` (16);
- fp16 pairs: as a ratio to fp16's eps (2^-11), to show why the check leaves them out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

RUNNERS = ["cpu", "cpu-ref", "cpu-fp16", "gpu-fp16", "gpu-fp32"]


def _probability_models(models: dict[str, Path]) -> dict[str, list[str]]:
    from tflkit import ir
    from tflkit.ir.entry import entry_point
    from tflkit.validation.inputs import is_quantized
    from tflkit.validation.tflite_subject import output_kind

    found = {}
    for name, path in sorted(models.items()):
        model = ir.load(path)
        if is_quantized(model):
            continue
        _, _, _, outs = entry_point(model)
        probs = [n for n, t in outs.items() if output_kind(t) == "probabilities"]
        if probs:
            found[name] = probs
    return found


def measure(name: str, path: Path, outputs: list[str], count: int, kind: str) -> list[str]:
    """Table rows (markdown) for one model."""
    from tflkit.compare.sensitivity import EPS, log_diff, log_peak
    from tflkit.validation.pipeline import ValidateOptions, validate

    options = ValidateOptions(runners=RUNNERS, num_inputs=count, input_kind=kind)
    report = validate(path, options)
    rows = []
    noise = report.sensitivity.get("fp32", {})
    for pair in report.pairs:
        if pair.verdict == "skipped":
            rows.append(f"| {name} | {pair.key} | - | - | skipped: {(pair.reason or '')[:60]} |")
            continue
        actual, expected = report.runner(pair.actual), report.runner(pair.expected)
        half = "fp16" in pair.key
        for out in outputs:
            diff = max(
                log_diff(e[out], a[out])
                for e, a in zip(expected.outputs, actual.outputs, strict=True)
            )
            if half:
                basis, ratio = "fp16 eps", diff / EPS["fp16"]
            else:
                own = (noise.get(out) or {}).get("log_max_abs") or 0.0
                peak = max(log_peak(e[out]) for e in expected.outputs)
                resolution = EPS["fp32"] * max(1.0, peak)
                basis = f"log noise {own:.3g}, resolution {resolution:.3g}"
                floor = max(own, resolution)
                ratio = diff / floor if floor > 0 else (0.0 if diff == 0 else float("inf"))
            shown = f"{ratio:.3g} ({basis})"
            rows.append(f"| {name} | {pair.key} | {out[:24]} | {diff:.3g} | {shown} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="substring of model names")
    parser.add_argument("--inputs", type=int, default=2, help="input sets per run")
    parser.add_argument("--input-kind", choices=("realistic", "random"), default="realistic")
    args = parser.parse_args(argv)
    from tests.conftest_corpus import cache_root
    from tests.corpus.fetch import fetch_world

    models = fetch_world(cache_root() / "real")
    if args.only:
        models = {k: v for k, v in models.items() if any(o in k for o in args.only)}
    print("| model | pair | output | largest log-probability difference | ratio |")
    print("|---|---|---|---|---|")
    for name, outputs in _probability_models(models).items():
        for row in measure(name, models[name], outputs, args.inputs, args.input_kind):
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
