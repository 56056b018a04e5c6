"""Benchmark: the int8 contract of ``validate`` on models ``tflkit convert --quantize`` makes.

Run from the repo root: ``PYTHONPATH=. python bench/validate_quantized.py [--keras M.keras]``
(default: the conv-net regressor of ``tests/test_validate_quantized.py`` from the test cache; a
random-weight classifier is a poor subject: its softmax barely follows its input, so even a
model whose inputs all clip matches it). It converts the
Keras model with ``--quantize dynamic``, ``--quantize int8`` (calibrated on uniform [0, 1]
data, the range the reference file's photographs are mapped to) and ``--quantize int8``
calibrated on data 50 times narrower (a broken contract: activations clip), validates each
against the Keras reference file, and prints per output the error, the noise the bound scales
with, and their ratio: the measurement behind ``NOISE_FACTOR["int8"]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np


def _default_keras() -> Path:
    from tests.conftest_corpus import cache_root

    found = sorted((cache_root() / "validate").glob("regressor-*/regressor.keras"))
    if not found:
        raise SystemExit("no cached regressor: run pytest tests/test_validate_quantized.py once")
    return found[-1]


def main(argv: list[str] | None = None) -> int:
    from tflkit.converters.api import convert
    from tflkit.converters.base import ConvertOptions
    from tflkit.validation.pipeline import ValidateOptions, validate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keras", type=Path, default=None)
    parser.add_argument("--size", type=int, default=32)
    args = parser.parse_args(argv)
    keras = args.keras or _default_keras()
    rng = np.random.default_rng(5)
    with tempfile.TemporaryDirectory(prefix="tflkit-quant-") as tmp:
        work = Path(tmp)
        shape = (16, 1, args.size, args.size, 3)
        np.savez(work / "good.npz", image=rng.uniform(0.0, 1.0, shape).astype(np.float32))
        np.savez(work / "narrow.npz", image=rng.uniform(0.0, 0.02, shape).astype(np.float32))
        cases = (
            ("dynamic", "dynamic", None),
            ("int8", "int8", work / "good.npz"),
            ("int8-narrow", "int8", work / "narrow.npz"),
        )
        print(
            f"{'model':12} {'output':16} {'verdict':8} {'max_abs':>9} {'noise':>9} "
            f"{'resolution':>10} {'ratio':>7}"
        )
        for name, quantize, data in cases:
            out = work / f"{name}.tflite"
            report = convert(keras, out, ConvertOptions(quantize=quantize, representative=data))
            checked = validate(
                out, ValidateOptions(runners=["cpu"], reference=Path(report.reference_file))
            )
            for o in checked.pair("cpu:reference").outputs:
                floor = max(o.noise or 0.0, o.resolution or 0.0)
                ratio = o.metrics.max_abs / floor if o.metrics and floor else float("nan")
                print(
                    f"{name:12} {o.name[:16]:16} {o.verdict:8} {o.metrics.max_abs:9.3g} "
                    f"{o.noise or 0:9.3g} {o.resolution or 0:10.3g} {ratio:7.3g}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
