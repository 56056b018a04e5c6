"""Benchmark: every ``.litertlm`` bundle of the corpus through ``validate`` (the LiteRT-LM engine
on CPU and GPU), the table of docs/llm.md ("Bundles") and the figures behind the verdicts'
constants (``tflkit.bundle.compare``: SCORE_TOL, TIE_BAND).

Run from the repo root (builds the bundle corpus into the test cache if needed)::

    PYTHONPATH=. python bench/llm_bundles.py                 # the table
    PYTHONPATH=. python bench/llm_bundles.py --json out.json --only tkv_int8_hf
    PYTHONPATH=. python bench/llm_bundles.py --calibrate 8   # the constants' figures

Per bundle: each engine run's status (or the engine's own line), greedy agreement per prompt,
the worst score difference (the GPU scoring the CPU's continuation against the CPU's scores),
the margins where tokens part, decode tokens/s, the fp32 rerun, and exit code. The healthy
bundles' worst score difference and worst margin gap are the calibration figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def _row(name: str, v: Any) -> str:
    from tflkit.bundle.engine import figures, how
    from tflkit.bundle.validate import CPU, GPU

    cells = []
    for key in (CPU, GPU):
        run = v.runs.get(key)
        if run is None:
            cells.append("-")
        elif not run.ok:
            cells.append(f"{how(run)}: {run.error}")
        else:
            tps = figures(run).get("last_decode_tokens_per_second", 0.0)
            cells.append(f"ran, decode {tps:.0f} tok/s")
    comps = v.comparisons.get(GPU, [])
    verdicts = ", ".join(
        f"{c.verdict} (a glitch: not in the next run)" if c.unstable else c.verdict for c in comps
    )
    worst = max((c.worst for c in comps if not c.unstable), default=0.0)
    fp32 = v.fp32["summary"] if v.fp32 else "-"
    where = _localized(v.localized())
    return (
        f"| {name} | {cells[0]} | {cells[1]} | {verdicts or '-'} | {worst:.3g} | {fp32} "
        f"| {where} | {v.exit_code} |"
    )


def _localized(found: dict[str, Any] | None) -> str:
    """The ops the section's steps named: the fp16 emulation's, then --localize's on the GPU."""
    if not found:
        return "-"
    out = []
    for op in found.get("fp16_emulation", {}).get("ops", []):
        name = op["output"].rsplit("/", 1)[-1]
        step = found["fp16_emulation"]["step"]
        out.append(f"emulation, step {step}: op #{op['op_index']} {op['op_type']} ({name})")
    gpu = found.get("gpu")
    if gpu:
        op = gpu["first_divergent_op"]
        name = (op.get("outputs") or ["?"])[0].rsplit("/", 1)[-1]
        out.append(
            f"{gpu['runner']}, step {gpu['step']}: op #{op['op_index']} {op['op_type']} ({name})"
        )
    return "; ".join(out) or "-"


def calibrate(runs: int) -> None:
    """On each healthy bundle that runs on both backends: the CPU once, the GPU ``runs`` times
    scoring the CPU's continuation: per run the worst score difference (the stable value and
    the glitches), then ``validate`` ``runs`` times for the decode-vs-scoring margins."""
    from tests.corpus import llm_bundles
    from tflkit.bundle.compare import SCORE_TOL
    from tflkit.bundle.engine import DEFAULT_PROMPTS, records, run_engine
    from tflkit.bundle.validate import GPU, validate_bundle

    prompts = list(DEFAULT_PROMPTS)
    for name, entry in llm_bundles.manifest()["bundles"].items():
        path = llm_bundles.bundle_path(name)
        cpu = run_engine(path, "cpu", prompts)
        if entry["fault"] is not None or not cpu.ok:
            continue
        texts = {i: [p["text"]] for i, p in enumerate(records(cpu))}
        worst = []
        for _ in range(runs):
            gpu = run_engine(path, "gpu", prompts, score=texts)
            if not gpu.ok:
                break
            worst.append([
                max(abs(g - c) for g, c in zip(p["scored"], q["scores"], strict=False))
                for p, q in zip(records(gpu), records(cpu), strict=True)
            ])  # fmt: skip
        if not worst:
            continue
        flat = sorted(w for run in worst for w in run)
        glitches = sum(w > SCORE_TOL for w in flat)
        d_cpu, d_gpu = [], []
        for _ in range(runs):
            for c in validate_bundle(path).comparisons[GPU]:
                if c.margins:
                    d_cpu.append(c.margins[0])
                    d_gpu.append(-c.margins[1])
        print(f"{name}: GPU scoring vs CPU over {len(flat)} prompt runs: median worst "
              f"{flat[len(flat) // 2]:.4g}, largest {flat[-1]:.4g}, {glitches} above "
              f"{SCORE_TOL}; at parting steps the CPU's scoring ranks the GPU's token above its "
              f"own pick by up to {max(d_cpu, default=0):.4g}, the GPU's ranks the CPU's token "
              f"above its pick by up to {max(d_gpu, default=0):.4g}", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from tests.corpus import llm_bundles
    from tflkit.bundle.validate import GPU, validate_bundle

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--json")
    parser.add_argument("--calibrate", type=int, metavar="RUNS")
    args = parser.parse_args(argv)
    if args.calibrate:
        calibrate(args.calibrate)
        return 0
    manifest = llm_bundles.manifest()["bundles"]
    names = args.only or list(manifest)
    out: dict[str, Any] = {}
    print("| bundle | engine CPU | engine GPU | per prompt | worst score diff | fp32 | op named "
          "(the section's --steps) | exit |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    healthy_worst, healthy_gaps = 0.0, []
    for name in names:
        v = validate_bundle(llm_bundles.bundle_path(name))
        out[name] = v.to_json()
        print(_row(name, v), flush=True)
        gpu = v.runs.get(GPU)
        if manifest[name]["fault"] is None and gpu is not None and gpu.ok:
            comps = v.comparisons[GPU]
            healthy_worst = max([healthy_worst, *(c.worst for c in comps if not c.unstable)])
            healthy_gaps += [abs(c.margins[1] - c.margins[0]) for c in comps if c.margins]
    print(f"\nhealthy bundles that ran on both: worst score difference {healthy_worst:.4g}, "
          f"margin gaps where tokens parted {[round(g, 4) for g in healthy_gaps]}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
