"""Benchmark: how far one-step flips of quantized activations move a quantized model's outputs,
trial by trial (the ``int8-fp16`` witness of ``validate``, docs/validate.md).

Run from the repo root::

    PYTHONPATH=. python bench/step_flips.py                     # every quantized real model
    PYTHONPATH=. python bench/step_flips.py --only audio_example1 --seeds 12

For each quantized model of ``tests.corpus.fetch.fetch_world`` and each input kind, the largest
change (in quantization steps, or in the output's units for float outputs) of any output of the
CPU run when the model runs op by op with its int8/uint8 op outputs flipped
(``tflkit.delegates.step_flips``), one figure per seed, on the input sets ``validate`` uses
(2 sets, seed 0).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def main(argv: list[str] | None = None) -> int:
    from tests.conftest_corpus import cache_root
    from tests.corpus.fetch import fetch_world
    from tflkit import ir
    from tflkit.delegates.base import execute
    from tflkit.delegates.litert_cpu import LiteRTCpuRunner
    from tflkit.delegates.step_flips import StepFlipRunner
    from tflkit.validation.inputs import is_quantized, make_input_sets

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="substring of model names")
    parser.add_argument("--seeds", type=int, default=12, help="trials per model and input kind")
    args = parser.parse_args(argv)
    models = fetch_world(cache_root() / "real")
    for name, path in sorted(models.items()):
        if args.only and not any(o in name for o in args.only):
            continue
        data = path.read_bytes()
        model = ir.load(data)
        if not is_quantized(model):
            continue
        for kind in ("realistic", "random"):
            feeds = make_input_sets(model, count=2, seed=0, kind=kind).feeds
            cpu = execute(LiteRTCpuRunner(data), feeds)
            if not cpu.ok:
                print(f"{name:44} {kind:10} cpu {cpu.status}")
                continue
            moved = []
            for seed in range(1, args.seeds + 1):
                flips = execute(StepFlipRunner(data, seed=seed), feeds)
                if not flips.ok:
                    moved.append(float("nan"))
                    continue
                worst = 0.0
                for out in cpu.outputs[0]:
                    a = np.stack([o[out] for o in cpu.outputs]).astype(np.float64)
                    b = np.stack([o[out] for o in flips.outputs]).astype(np.float64)
                    worst = max(worst, float(np.abs(a - b).max()))
                moved.append(worst)
            print(f"{name:44} {kind:10} " + " ".join(f"{m:.3g}" for m in moved), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
