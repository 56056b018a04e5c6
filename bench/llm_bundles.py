"""Benchmark: every ``.litertlm`` bundle of the corpus through ``validate`` (the LiteRT-LM engine
on CPU and GPU), the table of docs/llm.md ("Bundles") and the figures behind the verdicts'
constants (``tflkit.compare.tokens``: SCORE_TOL, TIE_BAND).

Run from the repo root (builds the bundle corpus into the test cache if needed)::

    PYTHONPATH=. python bench/llm_bundles.py                 # the table
    PYTHONPATH=. python bench/llm_bundles.py --json out.json --only tkv_int8_hf
    PYTHONPATH=. python bench/llm_bundles.py --calibrate 8   # the constants' figures
    PYTHONPATH=. python bench/llm_bundles.py --calibrate 8 --busy   # ... on a busy machine

Per bundle: each engine run's status (or the engine's own line), greedy agreement per prompt,
the worst score difference (the GPU scoring the CPU's continuation against the CPU's scores),
the margins where tokens part, decode tokens/s, the fp32 rerun, and exit code. The healthy
bundles' worst score difference and worst margin gap are the calibration figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any


def _row(name: str, v: Any) -> str:
    from tflkit.bundle.engine import figures, how
    from tflkit.validation.bundle_subject import CPU, GPU

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


def _scoring_runs(path: Path, prompts: list[str], runs: int, one_cpu: bool | None) -> None:
    """The CPU once, the GPU ``runs`` times scoring the CPU's continuation: per prompt run the
    worst score difference, the glitches above SCORE_TOL, and how far two glitched runs of one
    prompt are apart (what SAME_TOL must stay below)."""
    from tflkit.bundle.engine import records, run_engine
    from tflkit.compare.tokens import SCORE_TOL

    cpu = run_engine(path, "cpu", prompts)
    if not cpu.ok:
        print(f"  the CPU engine: {cpu.error}", flush=True)
        return
    texts = {i: [p["text"]] for i, p in enumerate(records(cpu))}
    worst: list[float] = []
    glitched: dict[int, list[list[float]]] = {}
    for _ in range(runs):
        gpu = run_engine(path, "gpu", prompts, score=texts, one_cpu=one_cpu)
        if not gpu.ok:
            break
        for i, (p, q) in enumerate(zip(records(gpu), records(cpu), strict=True)):
            w = max(abs(g - c) for g, c in zip(p["scored"], q["scores"], strict=False))
            worst.append(w)
            if w > SCORE_TOL:
                glitched.setdefault(i, []).append(p["scored"])
    apart = sorted(
        max(abs(x - y) for x, y in zip(a, b, strict=False))
        for runs_of_prompt in glitched.values()
        for k, a in enumerate(runs_of_prompt)
        for b in runs_of_prompt[k + 1 :]
    )
    if not worst:
        print(f"  the GPU engine: {gpu.error}", flush=True)
        return
    worst.sort()
    pinned = {None: "as validate runs it", True: "one CPU", False: "all CPUs"}[one_cpu]
    line = (
        f"  engine on {pinned}: {len(worst)} prompt runs, median worst "
        f"{worst[len(worst) // 2]:.4g}, largest {worst[-1]:.4g}, "
        f"{sum(w > SCORE_TOL for w in worst)} above {SCORE_TOL}"
    )
    if apart:
        line += f"; glitched runs of a prompt apart by {apart[0]:.4g} or more ({len(apart)} pairs)"
    print(line, flush=True)


def calibrate(runs: int, busy: bool = False) -> None:
    """On each healthy bundle that runs on both backends: the GPU scoring the CPU's continuation
    ``runs`` times (with ``busy``, beside another process's GPU work, the engine on all CPUs
    and on one), then ``validate`` ``runs`` times for the decode-vs-scoring margins."""
    from tests.busy_gpu import busy_gpu
    from tests.corpus import llm_bundles
    from tflkit.bundle.engine import DEFAULT_PROMPTS
    from tflkit.validation.bundle_subject import GPU, validate_bundle

    prompts = list(DEFAULT_PROMPTS)
    load = [llm_bundles.bundle_path("tkv_int8_hf").parent / "toy_model_with_kv_cache.tflite"]
    for name, entry in llm_bundles.manifest()["bundles"].items():
        path = llm_bundles.bundle_path(name)
        if entry["fault"] is not None or entry.get("backend_constraint"):
            continue
        print(f"{name}:", flush=True)
        with busy_gpu(load) if busy else contextlib.nullcontext():
            for one_cpu in (False, True) if busy else (None,):
                _scoring_runs(path, prompts, runs, one_cpu)
        if busy:
            continue
        d_cpu, d_gpu = [], []
        for _ in range(runs):
            for c in validate_bundle(path).comparisons[GPU]:
                if c.margins:
                    d_cpu.append(c.margins[0])
                    d_gpu.append(-c.margins[1])
        print(f"  at parting steps the CPU's scoring ranks the GPU's token above its own pick by "
              f"up to {max(d_cpu, default=0):.4g}, the GPU's ranks the CPU's token above its pick "
              f"by up to {max(d_gpu, default=0):.4g}", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from tests.corpus import llm_bundles
    from tflkit.validation.bundle_subject import GPU, validate_bundle

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--json")
    parser.add_argument("--calibrate", type=int, metavar="RUNS")
    parser.add_argument("--busy", action="store_true", help="calibrate beside other GPU work")
    args = parser.parse_args(argv)
    if args.calibrate:
        calibrate(args.calibrate, args.busy)
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
