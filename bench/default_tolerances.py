"""Benchmark: the errors the fixed default tolerances (``tflkit.compare.tolerances``) rest on.

Run from the repo root (software GPU: Mesa lavapipe; about 2 minutes)::

    PYTHONPATH=. XDG_RUNTIME_DIR=/tmp python bench/default_tolerances.py
    PYTHONPATH=. python bench/default_tolerances.py --model NAME=PATH   # another float model

For each real float model of the ``real_models`` set (``tests.corpus.fetch.REAL_FLOAT``, fetched
into the test cache) it runs ``validate`` with the CPU (XNNPACK), the CPU reference kernels, GPU
fp16 and GPU fp32 on 4 random input sets (seed 0) with the fixed bounds (no noise calibration),
on the model as it is, or, when the GPU refuses it whole, as ``tflkit rewrite`` leaves it, and
prints per model and pair the worst ``max_abs / peak`` of its outputs and its lowest cosine, then
the worst of each pair over every model and the margin the defaults leave: ``rtol`` over the
worst ratio, and whether every output passes its default bound.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

PAIRS = (("gpu-fp16", "cpu"), ("gpu-fp32", "cpu"), ("cpu-ref", "cpu"))


def _models(extra: list[str]) -> dict[str, Path]:
    from tests.conftest_corpus import cache_root
    from tests.corpus.fetch import REAL_FLOAT, fetch_real_float

    models = dict(zip(REAL_FLOAT, fetch_real_float(cache_root() / "real"), strict=True))
    for item in extra:
        name, _, path = item.partition("=")
        models[name] = Path(path)
    return models


def _rewritten(path: Path, workdir: Path) -> Path:
    """What ``tflkit rewrite`` makes of ``path`` (a ``-1`` batch fixed, refused ops swapped)."""
    from tflkit.rewriter.run import rewrite_model

    out = workdir / path.name
    out.write_bytes(rewrite_model(path.read_bytes(), label=str(path)).rewritten)
    return out


def _validate(path: Path):
    from tflkit.validation.pipeline import ValidateOptions, validate

    return validate(
        path,
        ValidateOptions(
            runners=sorted({r for pair in PAIRS for r in pair}),
            pairs=list(PAIRS),
            num_inputs=4,
            seed=0,
            input_kind="random",
            calibrate=False,
        ),
    )


def measure(name: str, path: Path, workdir: Path) -> list[dict]:
    """One row per pair: worst ``max_abs / peak``, lowest cosine, all outputs within bound."""
    report = _validate(path)
    if not all(r.ok for r in report.runners):  # the GPU refuses the model as it is
        report = _validate(_rewritten(path, workdir))
        name += " (rewritten)"
    rows = []
    for actual, expected in PAIRS:
        pair = report.pair(f"{actual}:{expected}")
        outs = [o for o in pair.outputs if o.metrics is not None and o.metrics.expected_peak > 0]
        if not outs:
            why = pair.reason or [(o.name, o.verdict, o.reasons) for o in pair.outputs]
            raise SystemExit(f"{name} {actual}:{expected}: nothing compared: {why}")
        worst = max(outs, key=lambda o: o.metrics.max_abs / o.metrics.expected_peak)
        rows.append(
            {
                "model": name,
                "pair": f"{actual}:{expected}",
                "ratio": worst.metrics.max_abs / worst.metrics.expected_peak,
                "output": worst.name,
                "cosine": min(o.metrics.cosine for o in outs),
                "within": all(o.verdict == "pass" for o in pair.outputs),
                "delegated": report.runner(actual).executed.get("fully_accelerated"),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    from tflkit.compare.tolerances import DEFAULTS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=[], help="NAME=PATH of another model")
    args = parser.parse_args(argv)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="tflkit-tolerances-") as tmp:
        for name, path in _models(args.model).items():
            rows += measure(name, path, Path(tmp))
    print("| model | pair | worst max_abs / peak (output) | lowest cosine | default passes |")
    print("|---|---|---|---|---|")
    for r in rows:
        full = "" if r["delegated"] in (None, True) else " (partly on the CPU)"
        print(
            f"| {r['model']}{full} | {r['pair']} | {r['ratio']:.2g} ({r['output']}) "
            f"| {r['cosine']:.6f} | {'yes' if r['within'] else 'NO'} |"
        )
    print()
    for actual, expected in PAIRS:
        key = f"{actual}:{expected}"
        mine = [r for r in rows if r["pair"] == key]
        worst = max(mine, key=lambda r: r["ratio"])
        precision = "fp16" if "fp16" in key else "fp32"
        tol = DEFAULTS[precision]
        margin = tol.rtol / worst["ratio"] if worst["ratio"] else float("inf")
        print(
            f"{key}: worst {worst['ratio']:.2g} of the peak ({worst['model']} {worst['output']}),"
            f" lowest cosine {min(r['cosine'] for r in mine):.6f}; default {precision} rtol "
            f"{tol.rtol:g} = {margin:.1f}x the worst, min_cosine {tol.min_cosine}; every output "
            f"within the default: {'yes' if all(r['within'] for r in mine) else 'NO'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
