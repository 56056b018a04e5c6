"""Benchmark: ``validate`` over the real-model corpus, with realistic and with random inputs.

Run from the repo root::

    PYTHONPATH=. python bench/validate_corpus.py                      # every real model
    PYTHONPATH=. python bench/validate_corpus.py --only deeplabv3 --inputs 2
    PYTHONPATH=. python bench/validate_corpus.py --render-only        # table from saved runs
    PYTHONPATH=. python bench/validate_corpus.py --only none --model nudenet/320n=PATH  # others

For each model of ``tests.corpus.fetch.fetch_world`` (fetched into the test cache) and each input
kind it runs ``validate`` with the CPU, the fp16 emulation, GPU fp16 and GPU fp32, and appends the
JSON report to ``--runs`` (one line per model and kind; already recorded runs are skipped, so an
interrupted sweep resumes). Then it writes ``--out`` (default ``docs/validate-corpus.md``):

- one row per model: the verdict with realistic and with random inputs, each explained;
- the calibration: per precision class, the largest ``max_abs / max(noise, resolution)`` ratio of
  any compared output, i.e. the smallest noise factor that passes every model of the corpus.
  ``tflkit.compare.tolerances.NOISE_FACTOR`` must be at least that (docs/validate.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RUNNERS = ("cpu", "cpu-fp16", "gpu-fp16", "gpu-fp32")
KINDS = ("realistic", "random")
PRECISION = {"gpu-fp32:cpu": "fp32", "gpu-fp16:cpu": "fp16", "cpu-fp16:cpu": "fp16"}


def _models(only: list[str], extra: list[str] = ()) -> dict[str, Path]:
    """The world corpus (names containing one of ``only``) and ``extra`` ``NAME=PATH`` models
    (converted or built ones, e.g. by ``tests/test_validate_output_kinds.py``)."""
    from tests.conftest_corpus import cache_root
    from tests.corpus.fetch import fetch_world

    models = fetch_world(cache_root() / "real")
    if only:
        models = {k: v for k, v in models.items() if any(o in k for o in only)}
    for item in extra:
        name, _, path = item.partition("=")
        models[name] = Path(path)
    return models


def _done(runs: Path) -> set[tuple[str, str]]:
    if not runs.is_file():
        return set()
    done = set()
    for line in runs.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            done.add((entry["name"], entry["kind"]))
    return done


def sweep(models: dict[str, Path], runs: Path, count: int, timeout: float) -> None:
    from tflkit.validation.pipeline import ValidateOptions, validate

    done = _done(runs)
    for name, path in sorted(models.items()):
        for kind in KINDS:
            if (name, kind) in done:
                continue
            start = time.perf_counter()
            options = ValidateOptions(
                runners=list(RUNNERS), num_inputs=count, input_kind=kind, timeout=timeout
            )
            try:
                report: dict[str, Any] = validate(path, options).to_json()
            except Exception as exc:  # a usage error (e.g. an input we cannot make) is a row too
                report = {"verdict": "error", "findings": [f"{type(exc).__name__}: {exc}"]}
            entry = {"name": name, "kind": kind, "seconds": time.perf_counter() - start}
            entry["report"] = report
            with runs.open("a") as handle:
                handle.write(json.dumps(entry, default=str) + "\n")
            verdict = report["verdict"]
            print(f"{name:48} {kind:10} {verdict:12} {entry['seconds']:.0f} s", flush=True)


def _ratio(out: dict[str, Any]) -> float | None:
    metrics = out.get("metrics") or {}
    floor = max(out.get("noise") or 0.0, out.get("resolution") or 0.0)
    if not metrics or out.get("noise") is None or floor <= 0:
        return None
    value = metrics.get("max_abs")
    return float(value) / floor if isinstance(value, (int, float)) else None


def _category(report: dict[str, Any]) -> str | None:
    """The kind of finding a verdict other than a plain pass is, or None when unexplained."""
    runners = {r["runner"]: r for r in report.get("runners", [])}
    pairs = {p["pair"]: p for p in report.get("comparisons", [])}
    gpu_errors = sorted(
        {
            f"{r['status']}: {(r.get('error') or '')[:60]}"
            for n, r in runners.items()
            if n.startswith("gpu") and r["status"] != "ok"
        }
    )
    if gpu_errors:
        dynamic = any("dynamic dimensions" in n for n in report.get("notes", []))
        return (
            "GPU cannot run it ("
            + "; ".join(gpu_errors)
            + ")"
            + ("; its inputs have dynamic dimensions" if dynamic else "")
        )
    fp32 = pairs.get("gpu-fp32:cpu")
    if fp32 and fp32["verdict"] == "fail":
        return "GPU disagrees with the CPU in fp32 too (not an fp16 matter)"
    if any(n.startswith("fp16 finding") for n in report.get("notes", [])):
        return "fp16 finding (the fp16 emulation fails too)"
    if report.get("verdict") == "inconclusive":
        return "not meaningful on these inputs (every output constant or within the bound)"
    return None


def _hazards(report: dict[str, Any]) -> list[str]:
    for runner in report.get("runners", []):
        if runner["runner"] == "cpu-fp16" and runner["status"] == "ok":
            return [
                f"fp16 hazard at op #{h['op_index']} {h['op_type']}"
                for h in (runner.get("executed") or {}).get("fp16_hazards", [])[:2]
            ]
    return []


def _why(report: dict[str, Any]) -> str:
    verdict = report.get("verdict", "?")
    if verdict == "error":
        return "; ".join(report.get("findings", []))[:160]
    parts = []
    category = _category(report) if verdict != "pass" else None
    if category:
        parts.append(category)
        parts += _hazards(report)
        for note in report.get("notes", []):
            if note.startswith("fp16 finding") and "moves it most are" in note:
                parts.append(
                    "fp16 storage: "
                    + note.split("moves it most are the outputs of ")[1].split(":")[0]
                )
                break
    gpu_down = bool(category and category.startswith("GPU cannot run it"))
    for pair in report.get("comparisons", []):
        if pair["verdict"] == "skipped":
            if not gpu_down:
                parts.append(f"{pair['pair']} skipped: {(pair.get('reason') or '')[:70]}")
            continue
        for out in pair["outputs"]:
            if out["verdict"] in ("fail", "not-meaningful", "unverified"):
                parts.append(f"{pair['pair']} {out['name']}: {out['verdict']}")
    for runner in report.get("runners", []):
        if runner["status"] != "ok" and not gpu_down:
            parts.append(f"{runner['runner']} {runner['status']}")
    if not parts and verdict == "pass":
        worst = max(
            (
                (r, pair["pair"])
                for pair in report.get("comparisons", [])
                for out in pair["outputs"]
                if (r := _ratio(out)) is not None
            ),
            default=None,
        )
        if worst is not None:
            parts.append(f"worst {worst[1]}: {worst[0]:.2g}x its noise")
    return "; ".join(dict.fromkeys(parts))[:320]


def render(runs: Path, out: Path) -> None:
    entries = [json.loads(line) for line in runs.read_text().splitlines() if line.strip()]
    by_model: dict[str, dict[str, dict[str, Any]]] = {}
    for entry in entries:
        by_model.setdefault(entry["name"], {})[entry["kind"]] = entry["report"]
    worst: dict[str, list[tuple[float, str]]] = {
        "fp32": [],
        "fp16": [],
        "int8": [],
        "int8-fp16": [],
    }
    for name, kinds in by_model.items():
        for kind, report in kinds.items():
            if report.get("verdict") != "pass" and _category(report) is not None:
                continue  # a finding (GPU fp32 disagreement, fp16 loss): not calibration data
            for pair in report.get("comparisons", []):
                precision = PRECISION.get(pair["pair"])
                for output in pair.get("outputs", []):
                    if output["verdict"] not in ("pass", "fail") or precision is None:
                        continue
                    ratio = _ratio(output)
                    if ratio is None:
                        continue
                    klass = "int8" if output.get("steps") is not None else precision
                    if "one-step flips" in (output.get("basis") or ""):
                        klass = "int8-fp16"
                    where = f"{name} ({kind}) {pair['pair']} {output['name']}"
                    worst[klass].append((ratio, where))
    lines = [
        "# validate over the real-model corpus",
        "",
        "Written by `PYTHONPATH=. python bench/validate_corpus.py` (runners: "
        + ", ".join(RUNNERS)
        + "; input sets per run as recorded in the runs file). Verdict with realistic inputs "
        "(photographs, speech-like audio and its spectrograms, valid indices; random where "
        "nothing fits) and with random inputs; the reason for anything but a plain pass.",
        "",
        "| model | realistic | why | random | why |",
        "|---|---|---|---|---|",
    ]
    counts: dict[str, dict[str, int]] = {k: {} for k in KINDS}
    for name in sorted(by_model):
        row = [name]
        for kind in KINDS:
            report = by_model[name].get(kind)
            if report is None:
                row += ["-", "not run"]
                continue
            verdict = report.get("verdict", "?")
            counts[kind][verdict] = counts[kind].get(verdict, 0) + 1
            row += [verdict, _why(report).replace("|", "/")]
        lines.append("| " + " | ".join(row) + " |")
    agree = total = healthy_agree = healthy = 0
    differ = []
    for name, kinds in sorted(by_model.items()):
        for kind, report in kinds.items():
            pairs = {p["pair"]: p for p in report.get("comparisons", [])}
            emu, gpu = pairs.get("cpu-fp16:cpu"), pairs.get("gpu-fp16:cpu")
            if not emu or not gpu or "skipped" in (emu["verdict"], gpu["verdict"]):
                continue
            fp32 = pairs.get("gpu-fp32:cpu")
            fp32_fails = {
                o["name"] for o in (fp32 or {}).get("outputs", []) if o["verdict"] == "fail"
            }
            for e_out, g_out in zip(emu["outputs"], gpu["outputs"], strict=True):
                if "unverified" in (e_out["verdict"], g_out["verdict"]):
                    continue
                same = e_out["verdict"] == g_out["verdict"]
                total += 1
                agree += same
                if e_out["name"] not in fp32_fails:
                    healthy += 1
                    healthy_agree += same
                if not same:
                    differ.append(
                        f"{name} ({kind}) {e_out['name']}: emulation {e_out['verdict']}, "
                        f"GPU {g_out['verdict']}"
                        + (", GPU fp32 fails too" if e_out["name"] in fp32_fails else "")
                    )
    lines += [
        "",
        f"fp16 emulation vs the software GPU's fp16 run: same verdict on {agree} of {total} "
        f"outputs compared by both, {healthy_agree} of {healthy} where the GPU's fp32 run does "
        "not fail" + (": differ on " + "; ".join(differ) if differ else "."),
    ]
    suspects: list[str] = []
    unexplained: list[str] = []
    for name, kinds in sorted(by_model.items()):
        for kind, report in kinds.items():
            pairs = {p["pair"]: p for p in report.get("comparisons", [])}
            fp32 = pairs.get("gpu-fp32:cpu")
            if fp32 and fp32["verdict"] == "pass" and report.get("verdict") != "pass":
                suspects.append(f"{name} ({kind}): {report.get('verdict')}: {_why(report)}")
                if _category(report) is None:
                    unexplained.append(f"{name} ({kind})")
    lines += [
        "",
        "Models whose GPU fp32 run matches the CPU but whose verdict is not a pass (each must be "
        f"a finding, not a false alarm): {len(suspects)}; false alarms (no finding explains "
        f"them): {len(unexplained)}"
        + (f" ({', '.join(unexplained)})" if unexplained else "")
        + ("" if not suspects else "\n\n" + "\n".join(f"- {s}" for s in suspects)),
    ]
    lines += [
        "",
        "Totals: "
        + "; ".join(
            f"{kind}: " + ", ".join(f"{v} {c}" for v, c in sorted(counts[kind].items()))
            for kind in KINDS
        ),
        "",
    ]
    lines += [
        "## Calibration: error over noise",
        "",
        "Per precision class, the largest `max_abs / max(noise, resolution)` of any output the "
        "runners compared on the models without a finding (pass, or a fail no finding explains), "
        "i.e. the smallest noise factor under which every healthy model above passes. "
        "`NOISE_FACTOR` in `tflkit/compare/tolerances.py` is set above it. `int8-fp16`: "
        "quantized models against GPU fp16 and the emulation, whose noise includes one-step "
        "flips of the quantized activations with fp16's odds (`bench/step_flips.py`).",
        "",
        "| precision | outputs | largest ratio | where | next |",
        "|---|---|---|---|---|",
    ]
    for klass, items in worst.items():
        items.sort(reverse=True)
        if not items:
            lines.append(f"| {klass} | 0 | - | - | - |")
            continue
        top = items[0]
        following = ", ".join(f"{r:.3g}" for r, _ in items[1:4])
        lines.append(f"| {klass} | {len(items)} | {top[0]:.3g} | {top[1]} | {following} |")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        type=Path,
        default=Path(tempfile.gettempdir()) / "tflkit-bench" / "validate_corpus_runs.jsonl",
    )
    parser.add_argument("--out", type=Path, default=Path("docs/validate-corpus.md"))
    parser.add_argument("--inputs", type=int, default=2, help="input sets per run")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per GPU runner")
    parser.add_argument("--only", action="append", default=[], help="substring of model names")
    parser.add_argument(
        "--model", action="append", default=[], help="NAME=PATH of a model beyond the corpus"
    )
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args(argv)
    args.runs.parent.mkdir(parents=True, exist_ok=True)
    if not args.render_only:
        sweep(_models(args.only, args.model), args.runs, args.inputs, args.timeout)
    render(args.runs, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
