"""Benchmark: how far an fp16 sum moves a quantized dense layer's outputs, against the flip odds.

Run from the repo root: ``PYTHONPATH=. python bench/fp16_accumulation.py [--only NAME]``
(default: ``long_dense_int8`` of ``tests/truth_models.py``, a generated full-int8 net ending in a
4,000-long dense layer, the length that motivated the odds; ``--only`` a real corpus model).

For every FULLY_CONNECTED op of the model it takes the op's int8 input and weights from one CPU
run (reference kernels, every tensor kept; the first realistic input set ``validate`` uses),
sums each output in float64 and again in fp16 one product at a time, and prints per output the
fp16 error in steps of the op's output grid beside the odds of a one-step flip that
``tflkit.delegates.step_flips`` gives it: from the output's magnitude alone (``m 2^-10``), and
with the sum length (``m 2^-10 sqrt(K)``, ``m`` at least the tensor's RMS magnitude).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np


def main(argv: list[str] | None = None) -> int:
    from tests.conftest_corpus import cache_root
    from tests.corpus.fetch import fetch_world
    from tflkit import ir
    from tflkit.ir.entry import entry_point
    from tflkit.validation.inputs import make_input_sets
    from tflkit.validation.localize import capture_cpu

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None, help="a real model's name (default: generated)")
    args = parser.parse_args(argv)
    if args.only is None:
        from tests.truth_models import truth_models

        path = truth_models() / "long_dense_int8.tflite"
    else:
        path = fetch_world(cache_root() / "real")[args.only]
    data = path.read_bytes()
    model = ir.load(data)
    _, _, inputs, _ = entry_point(model)
    feed = make_input_sets(model, count=1, kind="realistic").feeds[0]
    values = capture_cpu(data, model, feed, inputs)

    def real(tensor: ir.Tensor) -> np.ndarray:
        """An activation of the CPU run in its real values."""
        q = tensor.quantization
        raw = np.asarray(values[tensor.index], np.float64)
        return (raw - int(q.zeroPoint[0])) * float(q.scale[0])

    for op in (op for op in model.main.ops if op.type == "FULLY_CONNECTED"):
        x, w = op.inputs[0], op.inputs[1]
        out = op.outputs[0]
        if not (x.is_quantized and w.is_quantized and out.is_quantized):
            continue
        bias = op.inputs[2] if len(op.inputs) > 2 else None
        xs = real(x).reshape(-1, w.shape[-1])[0]
        ws = np.asarray(w.data, np.float64) * float(w.quantization.scale[0])
        b = (
            np.zeros(ws.shape[0])
            if bias is None
            else np.asarray(bias.data, np.float64)
            * float(x.quantization.scale[0])
            * float(w.quantization.scale[0])
        )
        exact = ws @ xs + b
        acc = np.zeros(ws.shape[0], np.float16)
        for k in range(ws.shape[1]):
            acc = (acc + (np.float16(xs[k]) * ws[:, k].astype(np.float16))).astype(np.float16)
        summed = acc.astype(np.float64) + b
        step = float(out.quantization.scale[0])
        zero = int(out.quantization.zeroPoint[0])
        q = np.asarray(values[out.index], np.int64).reshape(-1)[: ws.shape[0]]
        m = np.abs(q - zero).astype(np.float64)
        rms = math.sqrt(float(np.mean(m**2)))
        terms = ws.shape[1]
        print(f"{args.only} op #{op.index} FULLY_CONNECTED, sum of {terms}, output step {step:.4g}")
        header = ("output", "|q - zp|", "fp16 error (steps)", "odds m", "odds sqrt(K)")
        print("{:>6} {:>9} {:>19} {:>8} {:>13}".format(*header))
        for i in range(ws.shape[0]):
            error = (summed[i] - exact[i]) / step
            old = m[i] * 2.0**-10
            new = min(1.0, max(m[i], rms) * 2.0**-10 * math.sqrt(terms))
            print(f"{i:>6} {m[i]:>9g} {error:>19.3f} {old:>8.3f} {new:>13.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
