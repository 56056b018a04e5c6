"""Benchmark: LiteRT.js in headless Chromium against LiteRT's native GPU path, over a corpus slice.

Run from the repo root (Chromium, npm and Mesa >= 25 for lavapipe, as for the tests)::

    PYTHONPATH=. python bench/browser_corpus.py                 # the slice below -> docs/browser.md
    PYTHONPATH=. python bench/browser_corpus.py --only conv_dense --inputs 2

For each model it runs ``validate`` three times on the same input sets: the CPU with the native
GPU runners (``gpu-fp16``, ``gpu-fp32``: LiteRT's ``CompiledModel`` on this machine's Vulkan),
then the CPU with the browser runners (``webgpu-fp16``, ``webgpu-fp32``, ``wasm``: one browser
job) on each WebGPU adapter (``swiftshader``, ``lavapipe``). Per runner it records the status,
the largest absolute difference to the CPU over every output and input set (also relative to
the output's peak), the pair's verdict, the ops the GPU took and the compile time. It writes
``--out`` (default ``docs/browser.md``) with the command that made it. Software adapters: the
times say nothing about a phone; the numbers and the op coverage do.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

GENERATED = (
    "conv_dense",
    "fp16_weights",
    "dynamic_range_int8",
    "full_int8",
    "int64_argmax",
    "string_or_bool",
    "log_softmax",
    "keras_mobilenet_block",
    "keras_attention",
    "keras_transformer_mlp",
)
REAL = ("deeplabv3", "embedding_model", "keyword_spotting_pacman_v3.float32")
NATIVE = ("gpu-fp16", "gpu-fp32")
BROWSER = ("webgpu-fp16", "webgpu-fp32", "wasm")
ADAPTERS = ("swiftshader", "lavapipe")
INTRO = """
Every model runs on the CPU (LiteRT XNNPACK, the reference of every row) and on: the native GPU
runners (`gpu-fp16`, `gpu-fp32`: LiteRT's `CompiledModel` with the GPU accelerator, WebGPU over
Mesa's lavapipe Vulkan here), and the browser runners (`webgpu-fp16`, `webgpu-fp32`: LiteRT.js
2.5.3's WebGPU accelerator, ML Drift, in headless Chromium; `wasm`: its XNNPACK-in-Wasm CPU path)
on two WebGPU adapters: SwiftShader (core WebGPU) and lavapipe through ANGLE (WebGPU compatibility
mode, the device requested with the adapter's limits). Each browser backend runs every input set 3
times or more; `stable` says the runs agreed. `max abs`: the largest |runner - CPU| over every
output and input set; `rel`: that over the output's peak; `verdict`: validate's own (calibrated to
the model's noise, at the runner's precision class). `compile s`: the browser runs webgpu-fp16
first, so its compile includes filling the page's shader cache. Both adapters are software
renderers: compile times say nothing about a phone; the numbers and the op coverage do.
"""


def _models(only: list[str]) -> dict[str, Path]:
    from tests.conftest_corpus import cache_root, ensure_generated, tensorflow_version
    from tests.corpus.fetch import fetch_real_float

    repo = Path(__file__).resolve().parents[1]
    version = tensorflow_version()
    if version is None:
        raise SystemExit("TensorFlow is needed to generate the corpus (the test extra)")
    generated = ensure_generated(cache_root(), version)
    models = {"tiny_classifier": repo / "tflkit" / "examples" / "tiny_classifier.tflite"}
    models |= {name: generated / f"{name}.tflite" for name in GENERATED}
    real = {p.stem: p for p in fetch_real_float(cache_root() / "real")}
    models |= {name: real[name] for name in REAL if name in real}
    if only:
        models = {k: v for k, v in models.items() if any(o in k for o in only)}
    return models


def _count_ops(path: Path) -> int:
    from ai_edge_litert import schema_py_generated as schema

    root = schema.Model.GetRootAsModel(path.read_bytes(), 0)
    return sum(root.Subgraphs(i).OperatorsLength() for i in range(root.SubgraphsLength()))


def _row(report: Any, runner: str, adapter: str | None, ops_total: int) -> dict[str, Any]:
    run = report.runner(runner)
    ex = run.executed
    pair = next((p for p in report.pairs if p.key == f"{runner}:cpu"), None)
    worst, relative = None, None
    if pair is not None:
        for out in pair.outputs:
            if out.metrics is None:
                continue
            value = float(out.metrics.max_abs)
            peak = float(out.metrics.expected_peak or 0.0)
            if worst is None or value > worst:
                worst = value
                relative = value / peak if peak else None
    total = ex.get("ops_total") or ops_total
    if "ops_delegated" in ex:  # the browser's record
        delegated = ex["ops_delegated"]
    else:  # the native accelerator prints a summary only when it leaves ops to the CPU
        delegated = ex.get("ops_on_gpu")
        if delegated is None and ex.get("fully_accelerated"):
            delegated = total
    if runner == "wasm":
        delegated, total = "CPU", None
    repeats = ex.get("repeats") or {}
    return {
        "runner": runner,
        "adapter": adapter or "native (Vulkan, lavapipe)",
        "status": run.status,
        "error": run.error,
        "max_abs": worst,
        "relative": relative,
        "verdict": pair.verdict if pair is not None else None,
        "unverified": [o.name for o in pair.outputs if o.verdict == "unverified"] if pair else [],
        "ops": f"{delegated}/{total}" if delegated is not None and total else str(delegated or "-"),
        "compile_s": run.compile_seconds,
        "api_error": ex.get("api_error"),
        "stable": repeats.get("stable"),
    }


def measure(name: str, path: Path, inputs: int, timeout: float) -> list[dict[str, Any]]:
    from tflkit import ir
    from tflkit.validation.inputs import is_quantized
    from tflkit.validation.pipeline import ValidateOptions, validate

    quantized = is_quantized(ir.load(path))
    rows = []
    plans: list[tuple[tuple[str, ...], str | None]] = [(NATIVE, None)]
    plans += [(BROWSER, adapter) for adapter in ADAPTERS]
    for runners, adapter in plans:
        start = time.perf_counter()
        report = validate(
            path,
            ValidateOptions(
                runners=["cpu", *runners],
                num_inputs=inputs,
                timeout=timeout,
                calibrate=True,
                browser_adapter=adapter or "swiftshader",
            ),
        )
        took = time.perf_counter() - start
        print(f"{name} {adapter or 'native'}: {report.verdict} ({took:.1f} s)", file=sys.stderr)
        ops = _count_ops(path)
        rows += [
            {"model": name, "quantized": quantized, **_row(report, r, adapter, ops)}
            for r in runners
        ]
    return rows


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def render(rows: list[dict[str, Any]], command: str, seconds: float) -> str:
    lines = [
        "# LiteRT.js in the browser against LiteRT's native GPU path",
        "",
        f"Made by `{command}` ({seconds:.0f} s on this machine: 2 cores, no GPU; "
        "`bench/browser_corpus.py`).",
        "",
        " ".join(INTRO.split()),
        "",
    ]
    worst: dict[tuple[str, str, bool], float] = {}
    for row in rows:
        if row["relative"] is not None and row["status"] == "ok":
            key = (row["runner"], row["adapter"], row["quantized"])
            worst[key] = max(worst.get(key, 0.0), row["relative"])
    verdicts: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        verdicts.setdefault((row["runner"], row["adapter"]), []).append(
            row["verdict"] if row["status"] == "ok" else row["status"]
        )
    lines += [
        "## Headline",
        "",
        "Quantized models (`dynamic_range_int8`, `full_int8`) apart: the CPU computes them on "
        "their 8-bit grid (hybrid int8 kernels for dynamic-range weights), the GPU dequantized, "
        "so even fp32 runners differ from the CPU by about a quantization step there.",
        "",
        "| runner | adapter | passes | worst max abs / peak, float models | quantized models |",
        "|---|---|---|---|---|",
    ]
    for (runner, adapter), found in verdicts.items():
        passed = sum(v == "pass" for v in found)
        lines.append(
            f"| {runner} | {adapter} | {passed}/{len(found)} | "
            f"{_fmt(worst.get((runner, adapter, False)))} | "
            f"{_fmt(worst.get((runner, adapter, True)))} |"
        )
    lines += [
        "",
        "## Per model",
        "",
        "| model | runner | adapter | status | max abs | rel | verdict | GPU ops | compile s | "
        "stable | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        notes = []
        if row["api_error"]:
            notes.append(f"public JS API: {row['api_error']}")
        if row["unverified"]:
            notes.append(f"unverified: {', '.join(row['unverified'])}")
        if row["error"]:
            notes.append(row["error"][:120])
        stable = {True: "yes", False: "**no**", None: "-"}[row["stable"]]
        lines.append(
            f"| {row['model']} | {row['runner']} | {row['adapter']} | {row['status']} | "
            f"{_fmt(row['max_abs'])} | {_fmt(row['relative'])} | {row['verdict'] or '-'} | "
            f"{row['ops']} | {_fmt(row['compile_s'])} | {stable} | {'; '.join(notes)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[], help="model name part (repeat)")
    parser.add_argument("--inputs", type=int, default=2, help="input sets per model")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=Path("docs/browser.md"))
    parser.add_argument("--rows", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows = []
    for name, path in _models(args.only).items():
        rows += measure(name, path, args.inputs, args.timeout)
    command = "PYTHONPATH=. python bench/browser_corpus.py " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    args.out.write_text(render(rows, command.strip(), time.perf_counter() - start))
    if args.rows is not None:
        args.rows.write_text(json.dumps(rows, indent=1))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
