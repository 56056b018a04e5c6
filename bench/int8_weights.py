"""Measure the int8-weight (hybrid) family on the GPU accelerator, by value, in fp32 and fp16.

Run from the repo root: ``PYTHONPATH=. python bench/int8_weights.py [--json OUT] [--only TEXT]``.

Every form of ``tests/int8_weight_models.py`` (CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV,
FULLY_CONNECTED with int8 weights and float activations x kernel x stride x padding x dilation x
per-channel/per-tensor scales x batch, and the neighbours of the wrong forms) and its float twin
(the same weights dequantized to float32, a plain float op) run on the GPU accelerator in fp32
(``enforce_f32``) and fp16, on one seeded input, against the CPU's output of the float twin (what
the weights mean; the CPU's hybrid kernels quantize activations to int8 on the fly, which moves
their output by about 1% of its peak). A run is *wrong* when it parts from that reference by more
than :data:`WRONG` of its peak. Prints one markdown row per form: the error and cosine in each
precision, whether the accelerator logged ``Shape mismatch in GpuModelBuilder``, the CPU hybrid
kernel's own error, the static ``litert-gpu`` verdict of the int8 form and of its float twin, and
the totals: how many forms are wrong, and on how many the static verdict agrees.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

#: Relative error (of the output's peak) above which the GPU computed something else.
WRONG = 0.05
#: The accelerator's warning when a node's output shape is not the shape the model says.
MISMATCH = "Shape mismatch in GpuModelBuilder"


def _errors(want: np.ndarray, got: np.ndarray) -> tuple[float, float]:
    """(max abs error / peak of ``want``, cosine)."""
    got = got.reshape(want.shape).astype(np.float64)
    want = want.astype(np.float64)
    rel = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    norm = float(np.linalg.norm(got) * np.linalg.norm(want))
    return rel, float((got * want).sum() / norm) if norm else 0.0


def _static(model: Any) -> str:
    """The ``litert-gpu`` verdict of the op under test (op 1, between the two MULs)."""
    from tflkit.compat.static import analyze

    verdict = analyze(model, "litert-gpu").verdicts[1]
    if any(r.code == "WRONG_RESULT" for r in verdict.rejections):
        return "WRONG_RESULT"
    return "ok" if verdict.ok else ",".join(str(r.code) for r in verdict.rejections)


def measure(names: list[str] | None = None) -> list[dict[str, Any]]:
    """One row per form (see the module docstring)."""
    from tests.int8_weight_models import FORMS
    from tflkit import ir
    from tflkit.gpu.probe import run_jobs
    from tflkit.ir.feeds import random_feed
    from tflkit.rewriter.verify import run_cpu

    forms = [f for f in FORMS if names is None or any(n in f.name for n in names)]
    hybrid = [ir.dumps(f.build()) for f in forms]
    twins = [ir.dumps(f.build(float_weights=True)) for f in forms]
    feeds = [random_feed(ir.load(d).main.inputs, 0) for d in hybrid]
    want = [next(iter(run_cpu(d, x)[1].values())) for d, x in zip(twins, feeds, strict=True)]
    cpu = [next(iter(run_cpu(d, x)[1].values())) for d, x in zip(hybrid, feeds, strict=True)]
    runs = {f32: run_jobs(hybrid + twins, feeds + feeds, enforce_f32=f32) for f32 in (True, False)}
    rows = []
    for i, form in enumerate(forms):
        row: dict[str, Any] = {
            "name": form.name,
            "op": form.op,
            "static": _static(ir.load(hybrid[i])),
            "twin_static": _static(ir.load(twins[i])),
            "cpu_rel": _errors(want[i], cpu[i])[0],
        }
        for f32, label in ((True, "fp32"), (False, "fp16")):
            for key, job in (("", runs[f32][i]), ("twin_", runs[f32][len(forms) + i])):
                if job.outputs is None:
                    row[key + label] = {"status": job.status, "error": job.error, "wrong": True}
                    continue
                rel, cos = _errors(want[i], next(iter(job.outputs.values())))
                row[key + label] = {
                    "status": job.status,
                    "on_gpu": job.fully_accelerated,
                    "rel": rel,
                    "cos": cos,
                    "mismatch": MISMATCH in job.log,
                    "wrong": rel > WRONG,
                }
        row["wrong"] = [p for p in ("fp32", "fp16") if row[p]["wrong"]]
        row["twin_wrong"] = [p for p in ("fp32", "fp16") if row["twin_" + p]["wrong"]]
        rows.append(row)
    return rows


def _cell(m: dict[str, Any]) -> str:
    return f"{m['rel']:.2g} / {m['cos']:.3f}" if "rel" in m else m["status"]


def _measured(wrong: list[str]) -> str:
    return ("wrong: " + " and ".join(wrong)) if wrong else "right"


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table and its totals."""
    lines = [
        "| Form | GPU fp32 / fp16 (rel. err / cos) | mismatch line | CPU hybrid | int8 weights "
        "on the GPU | static | float twin on the GPU | static (twin) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    agree = twin_agree = 0
    for r in rows:
        mism = "yes" if r["fp32"].get("mismatch") or r["fp16"].get("mismatch") else ""
        agree += (r["static"] == "WRONG_RESULT") == bool(r["wrong"])
        twin_agree += (r["twin_static"] == "WRONG_RESULT") == bool(r["twin_wrong"])
        lines.append(
            f"| {r['name']} | {_cell(r['fp32'])}; {_cell(r['fp16'])} | {mism} | "
            f"{r['cpu_rel']:.2g} | {_measured(r['wrong'])} | {r['static']} | "
            f"{_measured(r['twin_wrong'])} | {r['twin_static']} |"
        )
    wrong = sum(bool(r["wrong"]) for r in rows)
    twin_wrong = sum(bool(r["twin_wrong"]) for r in rows)
    lines += [
        "",
        f"{len(rows)} forms: {wrong} wrong on the GPU with int8 weights, {twin_wrong} with the "
        f"same weights in float32; the static verdict agrees with the measurement on {agree} "
        f"of {len(rows)} (int8 weights) and {twin_agree} of {len(rows)} (float twins).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the rows as JSON here")
    parser.add_argument("--only", nargs="*", help="forms whose name contains one of these")
    args = parser.parse_args(argv)
    rows = measure(args.only)
    print(table(rows))
    if args.json:
        from pathlib import Path

        from tflkit.fsio import write_atomic

        write_atomic(Path(args.json), json.dumps(rows, indent=1).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
