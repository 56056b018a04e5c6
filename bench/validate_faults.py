"""Benchmark: faults planted in real models, and whether ``validate`` catches and localizes them.

Run from the repo root::

    PYTHONPATH=. python bench/validate_faults.py                   # every real model it applies to
    PYTHONPATH=. python bench/validate_faults.py --only deeplabv3 --fault weight
    PYTHONPATH=. python bench/validate_faults.py --render-only     # the table from --runs

Faults (planted by the helpers of ``tests/test_validate_faults.py``):

- ``fp16-add``: ``y*k, +1, *1/k`` appended to the first float output (``k`` puts ``y*k`` above
  65504): runners cpu, cpu-fp16, gpu-fp16; must fail cpu-fp16 (and, on the software GPU,
  gpu-fp16) and localize to the ``*k`` MUL;
- ``fp16-merged``: ``y*k*1/k``, which the software GPU computes without overflowing: must fail
  cpu-fp16 and localize to the ``*k`` MUL;
- ``weight``: a copy with one bias of the middle conv/dense op changed, checked against the
  original ``.tflite`` (runner cpu + reference): must fail ``cpu:reference`` and localize to it;
- ``zero-point``: a quantized model where one activation lost its non-zero zero point, against
  the original: must fail ``cpu:reference`` and localize to an op that writes or reads that
  tensor (both now compute with the wrong zero point: the writer clips what leaves the shifted
  range, a reader that copies integers without requantizing, e.g. RESHAPE or AVERAGE_POOL_2D,
  shifts every value). The activation is the one whose loss moves the model's CPU output most
  on a realistic input, among the copies the CPU still runs: on most activations real data
  never reaches the range the loss clips, so it changes nothing and is no fault, and some
  kernels (SOFTMAX, PAD, MAX_POOL_2D on XNNPACK) refuse the copy at prepare time. A model where
  no loss changes the output "does not apply".

Each result goes to ``--runs`` (JSON lines, resumable); the table to ``--out``
(default ``docs/validate-faults.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FAULTS = ("fp16-add", "fp16-merged", "weight", "zero-point")
RIGHT_PAIR = {
    "fp16-add": "cpu-fp16:cpu",
    "fp16-merged": "cpu-fp16:cpu",
    "weight": "cpu:reference",
    "zero-point": "cpu:reference",
}


def _plant(fault: str, model: Path, work: Path) -> tuple[Path, str | None, dict[str, Any]]:
    from tests.test_validate_faults import (
        _peak,
        plant_dropped_zero_point,
        plant_fp16_overflow,
        plant_weight,
    )
    from tflkit.validation.pipeline import ValidateOptions

    planted = work / f"{fault}.tflite"
    if fault.startswith("fp16"):
        try:
            name = plant_fp16_overflow(
                model, planted, peak=_peak(model), merged=fault == "fp16-merged"
            )
        except ValueError:
            return planted, None, {}
        options = ValidateOptions(
            runners=["cpu", "cpu-fp16", "gpu-fp16"], localize=True, localize_runner="cpu-fp16"
        )
        return planted, name, {"options": options}
    plant = plant_weight if fault == "weight" else plant_dropped_zero_point
    name = plant(model, planted)
    options = ValidateOptions(
        runners=["cpu"], reference=model, localize=True, localize_runner="reference"
    )
    return planted, name, {"options": options}


def _worst(report: Any, key: str) -> str | None:
    """The right pair's largest difference against its bound, for the output nearest to it."""
    pair = next((p for p in report.pairs if p.key == key), None)
    if pair is None:
        return None
    shown = []
    for out in pair.outputs:
        if out.metrics is None or not out.bound:
            continue
        ratio = out.metrics.max_abs / out.bound
        text = f"{out.metrics.max_abs:.3g} / bound {out.bound:.3g}"
        if out.steps is not None and out.bound_steps:
            text = f"{out.steps:.3g} / bound {out.bound_steps:.3g} steps"
        if out.log_diff is not None and out.log_bound:
            ratio = max(ratio, out.log_diff / out.log_bound)
            text += f"; log {out.log_diff:.3g} / bound {out.log_bound:.3g}"
        shown.append((ratio, text))
    return max(shown)[1] if shown else None


def _planted_ops(model: Any, tensor: str, *, reads: bool) -> set[int]:
    """Indices of the op writing ``tensor`` (and, with ``reads``, of the ops reading it)."""
    found = [t for t in model.main.tensors if t.name == tensor]
    ops = {t.producer.index for t in found if t.producer is not None}
    if reads:
        ops |= {op.index for t in found for op in t.consumers}
    return ops


def run_one(name: str, model: Path, fault: str, count: int) -> dict[str, Any] | None:
    from tflkit import ir
    from tflkit.validation.pipeline import validate

    with tempfile.TemporaryDirectory(prefix="tflkit-fault-") as tmp:
        planted, target, extra = _plant(fault, model, Path(tmp))
        if target is None:
            return None
        options = extra["options"]
        options.num_inputs = count
        start = time.perf_counter()
        report = validate(planted, options)
        planted_model = ir.load(planted)
    verdicts = {p.key: p.verdict for p in report.pairs}
    targets = _planted_ops(planted_model, target, reads=fault == "zero-point")
    loc = report.localization
    culprit = loc.culprits[0] if loc is not None and loc.culprits else None
    first = loc.first_divergent if loc is not None else None
    return {
        "name": name,
        "fault": fault,
        "planted": target,
        "verdicts": verdicts,
        "caught": verdicts.get(RIGHT_PAIR[fault]) == "fail",
        "observable": verdicts.get(RIGHT_PAIR[fault]) != "not-meaningful",
        "localized_on": loc.runner if loc is not None else None,
        "culprit": culprit.outputs if culprit is not None else None,
        "culprit_op": f"#{culprit.op_index} {culprit.op_type}" if culprit is not None else None,
        "named": culprit is not None and culprit.op_index in targets,
        "rank": next((k + 1 for k, c in enumerate(loc.culprits) if c.op_index in targets), None)
        if loc is not None
        else None,
        "first_divergent": first.op_index if first is not None else None,
        "unavailable": loc.unavailable if loc is not None else None,
        "worst": _worst(report, RIGHT_PAIR[fault]),
        "notes": report.notes,
        "seconds": time.perf_counter() - start,
    }


def sweep(
    models: dict[str, Path], runs: Path, count: int, faults: tuple[str, ...] = FAULTS
) -> None:
    done = set()
    if runs.is_file():
        for line in runs.read_text().splitlines():
            entry = json.loads(line)
            done.add((entry["name"], entry["fault"]))
    for name, path in sorted(models.items()):
        for fault in faults:
            if (name, fault) in done:
                continue
            try:
                entry = run_one(name, path, fault, count)
            except Exception as exc:  # a fault that cannot be planted here is a row too
                entry = {"name": name, "fault": fault, "error": f"{type(exc).__name__}: {exc}"}
            if entry is None:
                entry = {"name": name, "fault": fault, "skipped": "does not apply"}
            with runs.open("a") as handle:
                handle.write(json.dumps(entry, default=str) + "\n")
            shown = (
                "error"
                if "error" in entry
                else entry.get("skipped") or (f"caught={entry['caught']} named={entry['named']}")
            )
            print(f"{name:48} {fault:12} {shown}", flush=True)


def render(runs: Path, out: Path) -> None:
    entries = [json.loads(line) for line in runs.read_text().splitlines() if line.strip()]
    entries.sort(key=lambda e: (e["name"], FAULTS.index(e["fault"])))
    applied = [e for e in entries if "caught" in e and e.get("observable", True)]
    absent = {
        fault: sum(e["fault"] == fault and "skipped" in e for e in entries) for fault in FAULTS
    }
    hidden = [e for e in entries if "caught" in e and not e.get("observable", True)]
    lines = [
        "# Faults planted in real models",
        "",
        "Written by `PYTHONPATH=. python bench/validate_faults.py`; the faults and the runner "
        "that must catch each are described in the script's docstring.",
        "",
        f"{len(applied)} faults planted in {len({e['name'] for e in applied})} models: "
        f"{sum(e['caught'] for e in applied)} caught by the right runner, "
        f"{sum(e['named'] for e in applied)} localized to the planted op as the top culprit, "
        f"{sum(bool(e.get('rank')) for e in applied)} with the planted op among the culprits "
        "(below it: a fault the model had before planting, e.g. basic-pitch's LOG of an "
        "input that underflows fp16 on speech-like audio). "
        f"{len(hidden)} more planted where the generated inputs leave the output constant or "
        "~0 (the right pair says 'not meaningful on these inputs', listed last). "
        "Per fault: "
        + ", ".join(
            f"{fault} {sum(e['fault'] == fault for e in applied + hidden)} planted, "
            f"{absent[fault]} models where it does not apply"
            for fault in FAULTS
        )
        + " (no float output, no float bias, no quantized activation whose lost zero point "
        "changes the output).",
        "",
        "| model | fault | caught | verdicts | localized on | top culprit | planted op's rank |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in applied + hidden:
        verdicts = ", ".join(f"{k} {v}" for k, v in e["verdicts"].items())
        lines.append(
            f"| {e['name']} | {e['fault']} | {'yes' if e['caught'] else 'NO'} | {verdicts} | "
            f"{e['localized_on']} | {e['culprit_op']} | {e.get('rank') or 'NOT FOUND'} |"
        )
    missed = [e for e in applied if not e["caught"]]
    if missed:
        lines += [
            "",
            "Not caught: the right pair's largest difference against its bound. A fault within "
            "the bound is within the contract the pair applies (for cpu:reference on a "
            "quantized model, the int8 contract: 8 times how far a one-step change of the "
            "inputs moves the output), so no verdict can tell it from requantization on these "
            "inputs.",
            "",
        ]
        lines += [f"- {e['name']} {e['fault']}: {e.get('worst') or 'n/a'}" for e in missed]
    errors = [e for e in entries if "error" in e]
    if errors:
        lines += ["", "Could not be planted or run:", ""]
        lines += [f"- {e['name']} {e['fault']}: {e['error'][:160]}" for e in errors]
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        type=Path,
        default=Path(tempfile.gettempdir()) / "tflkit-bench" / "validate_faults_runs.jsonl",
    )
    parser.add_argument("--out", type=Path, default=Path("docs/validate-faults.md"))
    parser.add_argument("--inputs", type=int, default=2, help="input sets per run")
    parser.add_argument("--only", action="append", default=[], help="substring of model names")
    parser.add_argument(
        "--fault", action="append", choices=FAULTS, default=[], help="only these faults"
    )
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args(argv)
    args.runs.parent.mkdir(parents=True, exist_ok=True)
    if not args.render_only:
        from tests.conftest_corpus import cache_root
        from tests.corpus.fetch import fetch_world

        models = fetch_world(cache_root() / "real")
        if args.only:
            models = {k: v for k, v in models.items() if any(o in k for o in args.only)}
        sweep(models, args.runs, args.inputs, tuple(args.fault) or FAULTS)
    render(args.runs, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
