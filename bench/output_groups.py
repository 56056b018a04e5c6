"""Measure the constants of the output-kind rules (docs/validate.md, "Kinds of output").

Run from the repo root::

    PYTHONPATH=. python bench/output_groups.py                         # channel groups
    PYTHONPATH=. python bench/output_groups.py --model nudenet.tflite  # and more models
    PYTHONPATH=. python bench/output_groups.py --slope                 # softmax logit noise

Channel groups (``tflkit.compare.groups.SPLIT_RATIO``): for every output of the real corpus
(``tests.corpus.fetch.fetch_world``) and the models given with ``--model`` that has a channel
axis, on the CPU with realistic and with random inputs: each channel's peak |value|, the
largest ratio between neighbouring channels that are not scores in [0, 1] (parts of one
meaning unless the ratio says otherwise), and the groups detected.

``--slope`` (the per-element bound of a quantized model's probabilities): for each quantized
model's probabilities output, per input set, the logit noise ``|moved - base| / p (1 - p)`` of
the elements that moved beyond one step under the int8 input perturbation.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def _models(extra: list[Path]) -> dict[str, Path]:
    from tests.conftest_corpus import cache_root
    from tests.corpus.fetch import fetch_world

    models = fetch_world(cache_root() / "real")
    models.update({p.stem: p for p in extra})
    return models


def _run(path: Path, kind: str):
    from tflkit import ir
    from tflkit.delegates.base import execute
    from tflkit.delegates.litert_cpu import LiteRTCpuRunner
    from tflkit.ir.entry import entry_point
    from tflkit.validation.options import ValidateOptions
    from tflkit.validation.tflite_subject import _inputs, _output_infos

    data = path.read_bytes()
    model = ir.load(data)
    sets = _inputs(model, ValidateOptions(input_kind=kind))
    outputs = _output_infos(entry_point(model)[3], list(entry_point(model)[2].values()))
    return data, model, sets, outputs, execute(LiteRTCpuRunner(data), sets.feeds)


def groups(models: dict[str, Path]) -> None:
    from tflkit.compare.groups import channel_axis, detect_groups

    print("| model | inputs | output | shape | largest neighbour ratio (not scores) | groups |")
    print("|---|---|---|---|---|---|")
    for name, path in sorted(models.items()):
        for kind in ("realistic", "random"):
            try:
                *_, base = _run(path, kind)
            except Exception as exc:  # an input we cannot make: say so, go on
                print(f"| {name} | {kind} | - | - | {type(exc).__name__} | - |")
                continue
            if not base.ok:
                continue
            for output in base.outputs[0]:
                values = np.stack([np.asarray(o[output]) for o in base.outputs])
                shape = values.shape[1:]
                axis = channel_axis(shape)
                if axis is None or values.dtype.kind not in "fiu":
                    continue
                per = np.moveaxis(values.astype(np.float64), axis + 1, 0).reshape(shape[axis], -1)
                peak = np.abs(per).max(axis=1)
                unit = (per.min(axis=1) >= 0) & (per.max(axis=1) <= 1)
                ratios = [
                    max(peak[c], peak[c - 1]) / max(min(peak[c], peak[c - 1]), 1e-30)
                    for c in range(1, len(peak))
                    if not unit[c] and not unit[c - 1]
                ]
                found = detect_groups(values, shape)
                text = ", ".join(
                    f"{g.label} {g.channels} (peak {float(peak[g.start : g.stop].max()):.3g})"
                    for g in found
                )
                worst = f"{max(ratios):.3g}" if ratios else "-"
                print(f"| {name} | {kind} | {output} | {list(shape)} | {worst} | {text or '-'} |")


def slope(models: dict[str, Path]) -> None:
    from tflkit.compare.sensitivity import EPS, perturb
    from tflkit.delegates.base import execute
    from tflkit.delegates.litert_cpu import LiteRTCpuRunner
    from tflkit.validation.inputs import is_quantized, quantize_step

    for name, path in sorted(models.items()):
        try:
            data, model, sets, outputs, base = _run(path, "realistic")
        except Exception:
            continue
        if not base.ok or not is_quantized(model):
            continue
        quant = {s.name: s.quant for s in sets.specs if s.quant is not None}
        grid = {s.name: st for s in sets.specs if (st := quantize_step(s.tensor))}
        moved = execute(LiteRTCpuRunner(data), perturb(sets.feeds, EPS["int8"], 1, quant, grid))
        for info in outputs:
            if info.kind != "probabilities" or not moved.ok:
                continue
            unit = info.scale or EPS["int8"]

            def real(out: dict, info=info) -> np.ndarray:
                v = np.asarray(out[info.name]).astype(np.float64)
                return (v - info.zero_point) * info.scale if info.scale else v

            per_set = []
            for b, m in zip(base.outputs, moved.outputs, strict=True):
                p, d = real(b), np.abs(real(m) - real(b))
                beyond = d > unit
                s = np.maximum(p * (1 - p), unit)[beyond]
                per_set.append(f"{float(np.max(d[beyond] / s)):.3g}" if beyond.any() else "-")
            print(f"{name} {info.name} {list(info.shape)}: logit noise per set {per_set}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, action="append", default=[])
    parser.add_argument("--slope", action="store_true")
    args = parser.parse_args(argv)
    models = _models(args.model)
    (slope if args.slope else groups)(models)
    return 0


if __name__ == "__main__":
    sys.exit(main())
