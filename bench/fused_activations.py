"""Measure every op type with a fused activation option x every fused activation, CPU against
the GPU accelerator (fp32, ``enforce_f32``), by value.

Run from the repo root: ``PYTHONPATH=. python bench/fused_activations.py [--json OUT]``.

The one-op models of ``tests/fused_activation_models.py`` run on the CPU (ai-edge-litert
``Interpreter``) and, batched in one worker, on the GPU accelerator, on one seeded input (normals
times 4, so every activation clips something). A pair *parts* when the GPU's output differs from
the CPU's by more than :data:`PARTS` of the CPU output's peak. Prints one markdown row per op
type (the relative error per activation; "cpu refuses" where the CPU kernel rejects the form)
and the list of pairs that part, with their static ``litert-gpu`` verdict.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

#: Relative error (of the CPU output's peak) above which the two compute different results.
PARTS = 0.01


def measure() -> list[dict]:
    from tests.fused_activation_models import FORMS, feed_for
    from tflkit import ir
    from tflkit.compat.static import analyze
    from tflkit.gpu.jobs import run_jobs
    from tflkit.rewriter.verify import run_cpu

    rows, models, feeds = [], [], []
    for form in FORMS:
        data = ir.dumps(form.build())
        codes = [r.code for r in analyze(ir.load(data), "litert-gpu").verdicts[0].rejections]
        row = {"op": form.op, "activation": form.activation, "static": [str(c) for c in codes]}
        feed = feed_for(data)
        try:
            (row["cpu"],) = run_cpu(data, feed)[1].values()
        except Exception as exc:  # the CPU kernel's Prepare rejects the form
            row["cpu_error"] = str(exc).splitlines()[0][:120]
        else:
            row["job"] = len(models)
            models.append(data)
            feeds.append(feed)
        rows.append(row)
    jobs = run_jobs(models, feeds, enforce_f32=True)
    for row in rows:
        if "job" not in row:
            continue
        job = jobs[row.pop("job")]
        want = row.pop("cpu")
        if job.status != "ok" or job.outputs is None:
            row["gpu_error"] = f"{job.status}: {job.error}"
            continue
        (got,) = job.outputs.values()
        err = np.abs(got.reshape(want.shape) - want).max() / max(np.abs(want).max(), 1e-30)
        row["rel"] = float(err)
        if row["activation"] == "TANH":  # does the GPU apply the TANH the CPU left out?
            applied = np.tanh(want.astype(np.float64)) - got.reshape(want.shape)
            row["gpu_vs_tanh_of_cpu"] = float(np.abs(applied).max())
        row["parts"] = bool(err > PARTS)
    return rows


def _cell(row: dict) -> str:
    if "cpu_error" in row:
        return "cpu refuses"
    if "gpu_error" in row:
        return row["gpu_error"][:40]
    return f"**{row['rel']:.3g}**" if row["parts"] else f"{row['rel']:.2g}"


def report(rows: list[dict]) -> str:
    acts = list(dict.fromkeys(r["activation"] for r in rows))
    lines = ["| op | " + " | ".join(acts) + " |", "|---" * (len(acts) + 1) + "|"]
    for op in dict.fromkeys(r["op"] for r in rows):
        cells = [_cell(r) for r in rows if r["op"] == op]
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    parted = [r for r in rows if r.get("parts")]
    lines.append("")
    lines.append(f"{len(parted)} pairs part (GPU vs CPU > {PARTS:.0%} of the peak):")
    for r in parted:
        tanh = r.get("gpu_vs_tanh_of_cpu")
        applied = f", GPU = tanh(CPU) within {tanh:.1g}" if tanh is not None else ""
        lines.append(f"- {r['op']} + {r['activation']}: static {r['static'] or 'ok'}{applied}")
    said = [r for r in rows if "WRONG_RESULT" in r["static"]]
    agree = said == parted
    lines.append(f"static WRONG_RESULT on {len(said)} pairs: {'exactly' if agree else 'NOT'} those")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    rows = measure()
    print(report(rows))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
