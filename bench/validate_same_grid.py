"""Benchmark: the same-grid contract of ``validate --reference M.tflite`` on healthy copies.

Run from the repo root: ``PYTHONPATH=. python bench/validate_same_grid.py [--only NAME]``.

For every real quantized model whose inputs and outputs are quantized (the models the
"int8-same-grid" class applies to), it makes two healthy copies on the same grid, a re-export
(loaded and written back by tflkit's IR), ``tflkit rewrite``'s (the default rules through the
GPU checker's gate) and a forced one (every rule of the catalogue on every op it matches, as
``rewrite --rule`` does; ``unchanged`` when no rule fires), validates each against the original
with the CPU runner, and prints per copy the verdict, the largest difference in quantization
steps and the bound: the measurement behind ``NOISE_FACTOR["int8-same-grid"]`` (a healthy copy
must pass; the faults of ``bench/validate_faults.py`` must not).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def _copies(data: bytes) -> dict[str, bytes | None]:
    from tflkit import ir
    from tflkit.rewriter.rules import catalog
    from tflkit.rewriter.run import rewrite_model

    copies: dict[str, bytes | None] = {"re-export": ir.dumps(ir.load(data))}
    for kind, names in (("rewrite", ()), ("forced", tuple(r.name for r in catalog()))):
        try:
            rewritten = rewrite_model(data, rule_names=names, check=False).rewritten
        except Exception as exc:  # a rule that refuses this model's forced rewrite
            print(f"  {kind}: {type(exc).__name__}: {str(exc)[:120]}")
            rewritten = data
        copies[kind] = rewritten if rewritten != data else None
    return copies


def main(argv: list[str] | None = None) -> int:
    from tests.conftest_corpus import cache_root
    from tests.corpus.fetch import fetch_world
    from tflkit.validation.pipeline import ValidateOptions, validate

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="substring of model names")
    args = parser.parse_args(argv)
    models = fetch_world(cache_root() / "real")
    if args.only:
        models = {k: v for k, v in models.items() if any(o in k for o in args.only)}
    work = Path(tempfile.mkdtemp(prefix="tflkit-same-grid-"))
    print(f"{'model':48} {'copy':10} {'class':15} {'verdict':15} steps / bound")
    worst = 0.0
    failures = 0
    for name, path in sorted(models.items()):
        data = path.read_bytes()
        for kind, copy in _copies(data).items():
            if copy is None:
                print(f"{name:48} {kind:10} unchanged (no rule fires)")
                continue
            candidate = work / f"{name.replace('/', '_')}-{kind}.tflite"
            candidate.write_bytes(copy)
            report = validate(candidate, ValidateOptions(runners=["cpu"], reference=path))
            pair = next(p for p in report.pairs if p.key == "cpu:reference")
            klass = pair.outputs[0].tolerance.precision if pair.outputs else "-"
            if klass != "int8-same-grid":
                print(f"{name:48} {kind:10} {klass:15} (not on the same grid: skipped)")
                break
            steps = max((o.steps or 0.0) for o in pair.outputs)
            bound = min((o.bound_steps or 0.0) for o in pair.outputs)
            worst = max(worst, steps)
            failures += pair.verdict == "fail"
            print(f"{name:48} {kind:10} {klass:15} {pair.verdict:15} {steps:g} / {bound:g}")
    print(f"\nlargest difference of a healthy same-grid copy: {worst:g} steps; {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
