"""Benchmark: quantized models against their float twins, and back, through ``--reference``.

Run from the repo root: ``PYTHONPATH=. python bench/validate_twins.py``.

mltk ships several models twice, int8 (``NAME.tflite``) and float32 (``NAME.float32.tflite``),
with other input names, types and signatures. For each pair it validates the int8 model with the
float twin as ``--reference`` and the float model with the int8 one (CPU runner, realistic
inputs), and prints the verdict, the precision class, the largest difference and the bound: what
``tflkit/delegates/reference_io.py`` makes comparable (docs/validate.md).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from tests.conftest_corpus import cache_root
    from tests.corpus.fetch import fetch_world
    from tflkit.validation.pipeline import ValidateOptions, validate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=4, help="input sets per run")
    args = parser.parse_args(argv)
    models = fetch_world(cache_root() / "real")
    twins = sorted(n for n in models if f"{n}.float32" in models)
    print(f"{'model':42} {'reference':8} {'verdict':15} {'class':6} max abs / bound")
    for name in twins:
        for model, reference, label in (
            (name, f"{name}.float32", "float32"),
            (f"{name}.float32", name, "int8"),
        ):
            options = ValidateOptions(
                runners=["cpu"], reference=models[reference], num_inputs=args.inputs
            )
            report = validate(models[model], options)
            for out in report.pair("cpu:reference").outputs:
                steps = f" ({out.steps:g} steps)" if out.steps is not None else ""
                worst = out.metrics.max_abs if out.metrics is not None else float("nan")
                print(
                    f"{model:42} {label:8} {out.verdict:15} {out.tolerance.precision:6} "
                    f"{worst:.3g}{steps} / {out.bound or float('nan'):.3g}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
