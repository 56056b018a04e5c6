"""Benchmark: the figures behind ``tflkit.compare.steps.PART_FRACTION``, the share of the CPU
logits' largest magnitude a ``validate --steps`` step may differ by before it parts.

Run from the repo root (builds the tiny LLM corpus into the test cache if needed)::

    PYTHONPATH=. python bench/step_part_fraction.py           # the CPU runners (cpu-ref, cpu-fp16)
    PYTHONPATH=. python bench/step_part_fraction.py --gpu     # + the GPU in fp16 and fp32

Per graph of the corpus and runner: the largest per-step difference as a share of the CPU logits'
range over 4 decode steps, the runner's PART_FRACTION and their ratio (how far below the bound a
healthy model stays). A healthy corpus stays well below 1; a planted fp16 overflow
(``tests/test_llm_graphs.py``) makes the logits non-finite.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from tests.corpus.llm_steps import corpus_dir, inlined
    from tflkit.compare.steps import PART_FRACTION
    from tflkit.delegates.base import precision_of, spec_names
    from tflkit.validation.steps import steps_report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="run the GPU runners too")
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args(argv)
    runners = [n for n in spec_names(steps=True) if args.gpu or n not in spec_names(device="gpu")]
    folder = corpus_dir()
    print(f"{'graph':28} {'runner':10} {'worst/range':>12} {'bound':>8} {'ratio':>7} parts")
    for path in sorted(folder.glob("*.tflite")):
        data = path.read_bytes()
        if args.gpu:  # the GPU accelerator takes the corpus with its composites inlined
            data = inlined(data)
        report = steps_report(data, path.stem, args.steps, runners=runners)
        for name, run in report.runs.items():
            if run["status"] != "ok":
                print(f"{path.stem:28} {name:10} {run['status']}: {run.get('error')}")
                continue
            worst = max(s["max_rel_to_range"] for s in run["per_step"])
            bound = PART_FRACTION[precision_of(name)]
            part = run["first_part"]
            print(
                f"{path.stem:28} {name:10} {worst:12.3g} {bound:8.0e} {worst / bound:7.3f} "
                f"{'-' if part is None else part['why']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
