"""Surprises: every GPU wrong result, crash or refusal that ``check`` did not predict.

Run from the repo root (long: the corpus part runs the real CLI on every model)::

    PYTHONPATH=. python bench/surprises.py                      # families + corpus
    PYTHONPATH=. python bench/surprises.py --families-only      # the generated families (minutes)
    PYTHONPATH=. python bench/surprises.py --only keras_ --out /tmp/s.md

Two parts, one table (``--out``, default ``docs/surprises.md``, rewritten after every model):

* **Generated families** (``tests/compat_models.py`` CASES and VALUE_CASES, the fused
  activations of ``tests/fused_activation_models.py`` the CPU runs, and the int8-weight family
  of ``tests/int8_weight_models.py`` with its float twins), through the API in batches:
  the static verdict of the model (fatal issues, WRONG_RESULT ops, CRASH) against the
  accelerator in fp32 and fp16 (:func:`tflkit.gpu.probe.run_jobs`: crashed, refused, or an output
  that parts from the CPU's by more than :data:`WRONG` of its peak).
* **The corpus** (generated and world models, as ``bench/sweep.py`` lists them), through the
  CLI: ``check --probe --json`` and ``validate --json -n 1 -r cpu -r gpu-fp32 -r gpu-fp16``.

A surprise is a row: the accelerator crashed where check predicted no crash; refused a model
check said compiles (or compiled one it said fails); placed an op where check said otherwise
(``check --probe`` disagreements); or computed an output wrong in fp32 (``gpu-fp32`` fails
against the CPU) while check named no WRONG_RESULT op. fp16-only failures are listed apart:
check makes no claim on fp16 rounding (validate predicts it with its fp16 emulation).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sweep import REPO, Model, Runs, commit, corpus

#: An output parts from the CPU's when it differs by more than this share of its peak.
WRONG = 0.05
VALIDATE = ("validate", "--json", "-n", "1", "-r", "cpu", "-r", "gpu-fp32", "-r", "gpu-fp16")
VALIDATE += ("--timeout", "120")


# --- generated families (API) ------------------------------------------------------------------


def family_models() -> list[tuple[str, str, bytes, bytes]]:
    """(family, name, model bytes, reference model bytes) of every generated case: the
    reference is the model itself, or for an int8-weight form its float twin (what the weights
    mean: the CPU's hybrid kernels misread per-tensor depthwise weights)."""
    from tests import fused_activation_models as fused
    from tests.compat_models import CASES, VALUE_CASES
    from tests.int8_weight_models import FORMS
    from tflkit import ir

    out = [("compat", c.name, ir.dumps(c.build())) for c in CASES if not c.crashes]
    out += [("compat-values", c.name, ir.dumps(c.build())) for c in VALUE_CASES]
    out += [
        ("fused-activations", f.name, ir.dumps(f.build())) for f in fused.FORMS if fused.cpu_runs(f)
    ]
    found = [(family, name, data, data) for family, name, data in out]
    for f in FORMS:
        twin = ir.dumps(f.build(True))
        found.append(("int8-weights", f.name, ir.dumps(f.build()), twin))
        found.append(("int8-weights-twins", f.name, twin, twin))
    return found


def _claims(data: bytes) -> dict[str, Any]:
    from tflkit import ir
    from tflkit.compat.check import check_report

    report = check_report(ir.load(data))
    return {
        "compiles": report.compiles,
        "crash": any(i.code == "CRASH" for i in report.issues)
        or any(r.code == "CRASH" for o in report.ops for r in o.reasons),
        "wrong_ops": [
            f"#{o.index} {o.type}" for o in report.ops if o.on_gpu and o.status == "rejected"
        ],
    }


def _parts(reference: bytes, feed: dict[str, np.ndarray], job: Any) -> list[str]:
    """Float outputs the GPU computed wrong (vs the builtin CPU kernels on ``reference``)."""
    from tflkit import ir
    from tflkit.rewriter.verify import run_cpu

    _, want = run_cpu(reference, feed)
    outputs = ir.load(reference).main.outputs
    got = job.outputs
    wrong = []
    for i, tensor in enumerate(outputs):
        name = tensor.name
        if tensor.type_name != "FLOAT32":  # declared type: what the app reads
            continue
        w = np.asarray(want[name], np.float64)
        g = got.get(name) if name in got else list(got.values())[i]
        g = np.asarray(g, np.float64).reshape(w.shape)
        finite = np.isfinite(w)
        peak = float(np.abs(w[finite]).max()) if finite.any() else 0.0
        if float(np.nanmax(np.abs(g - w))) > WRONG * max(peak, 1e-30):
            wrong.append(name)
    return wrong


def sweep_families() -> list[dict[str, Any]]:
    """One record per generated model: claims, and what the GPU did in fp32 and fp16."""
    from tflkit import ir
    from tflkit.gpu.probe import run_jobs
    from tflkit.ir.feeds import random_feed

    models = family_models()
    feeds = [random_feed(ir.load(d).main.inputs, 0) for _, _, d, _ in models]
    datas = [d for _, _, d, _ in models]
    runs = {f32: run_jobs(datas, feeds, enforce_f32=f32) for f32 in (True, False)}
    records = []
    for i, (family, name, data, reference) in enumerate(models):
        record = {"family": family, "model": name, **_claims(data)}
        for f32, label in ((True, "fp32"), (False, "fp16")):
            job = runs[f32][i]
            wrong = _parts(reference, feeds[i], job) if job.outputs else []
            record[label] = {"status": job.status, "compiled": job.compiled, "wrong": wrong}
        records.append(record)
    return records


def family_surprises(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, detail) of each surprise of one generated model."""
    found = []
    for label in ("fp32", "fp16"):
        seen = record[label]
        if seen["status"] == "crashed" and not record["crash"]:
            found.append(("crash", f"{label}: the accelerator crashed"))
        elif seen["status"] != "crashed" and seen["compiled"] != record["compiles"]:
            said = "compiles" if record["compiles"] else "fails as a whole"
            found.append(("refusal", f"{label}: check says it {said}; status {seen['status']}"))
        if seen["wrong"] and not record["wrong_ops"]:
            kind = "wrong result" if label == "fp32" else "fp16 only"
            found.append((kind, f"{label}: outputs {', '.join(seen['wrong'])} part from the CPU"))
    if record["wrong_ops"] and not record["fp32"]["wrong"] and not record["fp16"]["wrong"]:
        found.append(("false alarm", f"check says wrong: {', '.join(record['wrong_ops'])}"))
    fp16_only = [f for f in found if f[0] == "fp16 only"]
    if fp16_only and any(f[0] == "wrong result" for f in found):
        found = [f for f in found if f[0] != "fp16 only"]
    return found


# --- the corpus (CLI) --------------------------------------------------------------------------


def sweep_model(model: Model, runs: Runs, timeout: float) -> None:
    runs.run(model, "probe", ["check", "--probe", "--json", str(model.path)], timeout)
    runs.run(model, "validate3", [*VALIDATE, str(model.path)], timeout)


def corpus_surprises(model: Model, runs: Runs) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    probe = runs.get(model, "probe") or {}
    validate = runs.get(model, "validate3") or {}
    for entry, what in ((probe, "check --probe"), (validate, "validate")):
        if entry.get("hung") or entry.get("traceback") or entry.get("code") == 3:
            found.append(("tflkit", f"{what}: exit {entry.get('code')}, {entry.get('stderr')}"))
    report = probe.get("report") or {}
    info = report.get("probe") or {}
    crash_said = any(i.get("code") == "CRASH" for i in report.get("issues", []))
    if info.get("crash") and not crash_said:
        found.append(("crash", f"{info['crash'].get('op_type')}: {info['crash'].get('message')}"))
    if info.get("model_agrees") is False:
        said = "compiles" if report.get("compiles") else "fails as a whole"
        found.append(("refusal", f"check says it {said}; the accelerator: {info.get('status')}"))
    for d in info.get("disagreements", []):
        where = "GPU" if d.get("probe_on_gpu") else "CPU"
        found.append(("placement", f"op #{d['op_index']} {d['op_type']}: accelerator {where}"))
    wrong_ops = [
        o for o in report.get("ops", []) if o.get("on_gpu") and o.get("status") == "rejected"
    ]
    checked = validate.get("report") or {}
    for pair in checked.get("comparisons", []):
        if pair.get("expected") != "cpu" or pair.get("verdict") != "fail":
            continue
        if pair.get("actual") == "gpu-fp32" and not wrong_ops:
            found.append(("wrong result", "gpu-fp32 fails against the CPU"))
        elif pair.get("actual") == "gpu-fp16" and not wrong_ops:
            fp32 = [p for p in checked["comparisons"] if p.get("actual") == "gpu-fp32"]
            if fp32 and fp32[0].get("verdict") == "pass":
                found.append(("fp16 only", "gpu-fp16 fails, gpu-fp32 passes"))
    return found


# --- the page ----------------------------------------------------------------------------------


def render(families: list[dict[str, Any]], models: list[Model], runs: Runs, seconds: float) -> str:
    rows = [(r["family"], r["model"], k, d) for r in families for k, d in family_surprises(r)]
    swept = [m for m in models if runs.get(m, "validate3") is not None]
    rows += [("corpus", m.name, k, d) for m in swept for k, d in corpus_surprises(m, runs)]
    kinds: dict[str, int] = {}
    for row in rows:
        kinds[row[2]] = kinds.get(row[2], 0) + 1
    counted = ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())) or "none"
    lines = [
        "# Surprises: what the GPU did that `check` did not predict",
        "",
        "Made by `PYTHONPATH=. python bench/surprises.py` (see its docstring for what counts); "
        f"{len(families)} generated models and {len(swept)} of {len(models)} corpus models "
        f"swept in {seconds / 60:.0f} min; ai-edge-litert 2.3 on lavapipe.",
        "",
        f"**Surprises: {len(rows)}** ({counted}). `fp16 only` rows are fp16 rounding check "
        "makes no claim on; `false alarm` rows are WRONG_RESULT verdicts the GPU computed right.",
        "",
        "| Source | Model | Kind | What happened |",
        "|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], help="corpus model substring")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "surprises.md")
    parser.add_argument(
        "--runs", type=Path, default=Path(tempfile.gettempdir()) / "tflkit-surprises.jsonl"
    )
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--families-only", action="store_true")
    args = parser.parse_args(argv)
    from tflkit.fsio import write_atomic

    start = time.perf_counter()
    print("families: compat cases, fused activations, int8 weights", file=sys.stderr, flush=True)
    families = sweep_families()
    models = [] if args.families_only else corpus(args.only)
    head = commit()
    runs = Runs(args.runs, head, head)
    write_atomic(args.out, render(families, models, runs, time.perf_counter() - start).encode())
    for i, model in enumerate(models):
        print(f"[{i + 1}/{len(models)}] {model.name}", file=sys.stderr, flush=True)
        sweep_model(model, runs, args.timeout)
        page = render(families, models, runs, time.perf_counter() - start)
        write_atomic(args.out, page.encode())
    args.runs.with_suffix(".families.json").write_text(json.dumps(families, indent=1))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
