"""Benchmark: ``validate --localize --repro DIR`` on planted and real faults, each repro run alone.

Run from the repo root::

    PYTHONPATH=. python bench/repro_faults.py                       # planted + real faults
    PYTHONPATH=. python bench/repro_faults.py --only magika         # one case (substring)
    PYTHONPATH=. python bench/repro_faults.py --render-only         # the table from --runs

Cases:

- *planted* (the helpers of ``tests/test_validate_faults.py``, as ``bench/validate_faults.py``
  plants them) in the models of ``--model`` (default: ``PLANTED_MODELS``): ``fp16-add`` and
  ``fp16-merged`` (validated with ``-r cpu -r cpu-fp16 -r gpu-fp16``, localized on the fp16
  emulation), ``weight`` and ``zero-point`` (against the original ``.tflite``, ``-r cpu
  --reference ORIGINAL``, localized on the reference: a difference between two models on the
  CPU, for which ``--repro`` writes nothing and says why in one line);
- *real*: magika 0.5.1's file-type classifier converted by ``tflkit convert`` and rewritten by
  ``tflkit rewrite`` (GPU fp16 NaN) and BirdNET's metadata model (fp16 storage of SIN's
  arguments); each with ``validate``'s default runners.

Each case runs ``tflkit validate MODEL -n 2 --localize --repro DIR --json`` as a subprocess,
then, when a repro was written, ``python repro.py`` in DIR in a fresh process (no
``PYTHONPATH``: only ai-edge-litert and numpy): reproduced = exit 1 and a line ``REPRODUCED``.
Each result goes to ``--runs`` (JSON lines, resumable); the table to ``--out`` (default
``docs/repro.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FAULTS = ("fp16-add", "fp16-merged", "weight", "zero-point")
#: float models for fp16-add, fp16-merged and weight; an int8 one for zero-point
PLANTED_MODELS = (
    "openwakeword/hey_mycroft_v0.1",
    "simple-cv/deeplabv3",
    "mltk/keyword_spotting",
)
REAL = {
    "magika fp16 overflow": "magika/standard_v1",
    "BirdNET fp16 SIN": "birdnet/BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16",
}
TIMEOUT_S = 1200.0


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "tflkit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "tflkit.cli.main"]


def _env(*, tflkit_path: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    if not tflkit_path:
        env.pop("PYTHONPATH", None)
    return env


def _magika(cache: Path) -> Path:
    """magika 0.5.1's classifier, converted and rewritten once into the test cache (the tests'
    own helper, so the test and this table run the same model)."""
    from tests.test_repro import magika_model

    return magika_model(cache)


def _plant(fault: str, model: Path, work: Path) -> tuple[Path | None, list[str]]:
    """The planted copy and the validate arguments that catch it (None: does not apply)."""
    from tests.test_validate_faults import (
        _peak,
        plant_dropped_zero_point,
        plant_fp16_overflow,
        plant_weight,
    )

    planted = work / f"{fault}.tflite"
    if fault.startswith("fp16"):
        try:
            plant_fp16_overflow(model, planted, peak=_peak(model), merged=fault == "fp16-merged")
        except ValueError:
            return None, []
        runners = ["-r", "cpu", "-r", "cpu-fp16", "-r", "gpu-fp16"]
        return planted, [*runners, "--localize-on", "cpu-fp16"]
    plant = plant_weight if fault == "weight" else plant_dropped_zero_point
    if plant(model, planted) is None:
        return None, []
    return planted, ["-r", "cpu", "--reference", str(model), "--localize-on", "reference"]


def _run_script(directory: Path, script: str = "repro.py") -> dict[str, Any]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, script],
        cwd=directory,
        env=_env(tflkit_path=False),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    lines = [s for s in done.stdout.splitlines() if s.startswith(("REPRODUCED", "not repro"))]
    worst = [s.split("worst element ", 1)[1] for s in done.stdout.splitlines() if "worst" in s]
    return {
        "script_code": done.returncode,
        "reproduced": done.returncode == 1 and "REPRODUCED" in done.stdout,
        "script_line": lines[-1][:200] if lines else done.stderr.strip()[-200:],
        "worst": worst[0] if worst else None,
        "script_seconds": round(time.perf_counter() - start, 2),
    }


def _run_fp32(directory: Path) -> dict[str, Any]:
    """The same script with ``enforce_f32=True``: does the fault need fp16?"""
    text = (directory / "repro.py").read_text()
    (directory / "repro_fp32.py").write_text(text.replace("enforce_f32=False", "enforce_f32=True"))
    got = _run_script(directory, "repro_fp32.py")
    return {"fp32_reproduced": got["reproduced"], "fp32_worst": got["worst"]}


def run_case(model: Path, args: list[str], work: Path) -> dict[str, Any]:
    """``validate --localize --repro`` on ``model``, then the repro script alone."""
    from tflkit import ir

    out = work / "repro"
    cmd = [*_cli(), "validate", str(model), "-n", "2", *args, "--localize"]
    cmd += ["--repro", str(out), "--json"]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=TIMEOUT_S)
    seconds = round(time.perf_counter() - start, 2)
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return {"error": f"validate exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    loc = report.get("localization") or {}
    ops = {o["op_index"]: o["op_type"] for o in loc.get("ops") or ()}
    culprits = loc.get("culprits") or []
    notes = [n for n in report.get("notes") or () if n.startswith("repro:")]
    entry: dict[str, Any] = {
        "verdicts": {c["pair"]: c["verdict"] for c in report.get("comparisons") or ()},
        "localized_on": loc.get("runner"),
        "culprit": f"#{culprits[0]} {ops.get(culprits[0], '?')}" if culprits else None,
        "note": notes[0] if notes else None,
        "validate_seconds": seconds,
        "written": (out / "model.tflite").is_file(),
    }
    if entry["written"]:
        chunk = ir.load((out / "model.tflite").read_bytes())
        entry["repro_ops"] = [op.type for op in chunk.main.ops]
        entry.update(_run_script(out))
        if "enforce_f32=False" in (out / "repro.py").read_text():
            entry.update(_run_fp32(out))
    return entry


def cases(cache: Path, models: list[str], only: list[str]) -> list[tuple[str, str, Any]]:
    """(fault, model name, a function giving (model path, validate args) or None)."""
    from tests.corpus.fetch import fetch_world

    world = fetch_world(cache / "real")
    found: list[tuple[str, str, Any]] = []
    for name in models:
        for fault in FAULTS:
            found.append((fault, name, ("planted", world[name], fault)))
    for fault, name in REAL.items():
        found.append((fault, name, ("real", name, world)))
    return [c for c in found if not only or any(o in f"{c[0]} {c[1]}" for o in only)]


def sweep(cache: Path, runs: Path, models: list[str], only: list[str]) -> None:
    done = set()
    if runs.is_file():
        for line in runs.read_text().splitlines():
            entry = json.loads(line)
            done.add((entry["fault"], entry["model"]))
    for fault, name, how in cases(cache, models, only):
        if (fault, name) in done:
            continue
        with tempfile.TemporaryDirectory(prefix="tflkit-repro-bench-") as tmp:
            work = Path(tmp)
            entry: dict[str, Any] = {"fault": fault, "model": name, "kind": how[0]}
            try:
                if how[0] == "planted":
                    planted, args = _plant(fault, how[1], work)
                    if planted is None:
                        entry["skipped"] = "does not apply"
                    else:
                        entry.update(run_case(planted, args, work))
                else:
                    path = _magika(cache) if name.startswith("magika") else how[2][name]
                    entry.update(run_case(path, [], work))
            except Exception as exc:  # a row, not a crash of the benchmark
                entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
        with runs.open("a") as handle:
            handle.write(json.dumps(entry) + "\n")
        shown = (
            entry.get("skipped")
            or entry.get("error")
            or (f"written={entry['written']} reproduced={entry.get('reproduced')}")
        )
        print(f"{fault:34} {name:52} {shown}", flush=True)


def _row(e: dict[str, Any]) -> str:
    ops = e.get("repro_ops")
    count = f"{len(ops)} ({', '.join(ops)})" if ops else "—"
    reproduced = "not written"
    if e.get("written"):
        reproduced = "yes" if e["reproduced"] else "**NO**"
    seconds = e["validate_seconds"] + e.get("script_seconds", 0.0)
    failing = ", ".join(k for k, v in e["verdicts"].items() if v == "fail") or "none"
    culprit = e["culprit"] or "none alone"
    end = re.search(r"ending at op (#\d+ \S+?);", e.get("note") or "")
    if end and not e["culprit"]:  # grown back from the first op wrong in the model's run
        culprit += f"; first wrong in the model's run: {end.group(1)}"
    fp32 = {True: "yes", False: "no", None: "—"}[e.get("fp32_reproduced")]
    return (
        f"| {e['fault']} | {e['model']} | {failing} | {e['localized_on']} | "
        f"{culprit} | {count} | {reproduced} | {fp32} | {seconds:.0f} |"
    )


def render(runs: Path, out: Path) -> None:
    entries = [json.loads(line) for line in runs.read_text().splitlines() if line.strip()]
    order = {f: i for i, f in enumerate((*FAULTS, *REAL))}
    entries.sort(key=lambda e: (e["kind"] != "planted", order.get(e["fault"], 99), e["model"]))
    ran = [e for e in entries if "validate_seconds" in e]
    written = [e for e in ran if e["written"]]
    reproduced = [e for e in written if e["reproduced"]]
    gpu = [e for e in ran if e["localized_on"] != "reference"]
    largest = max((len(e["repro_ops"]) for e in written), default=0)
    lines = [
        "# `--repro` on planted and real faults",
        "",
        "Written by `PYTHONPATH=. python bench/repro_faults.py` (the cases are described in its "
        "docstring). Each case: `tflkit validate MODEL -n 2 --localize --repro DIR --json`, then "
        "`python repro.py` in DIR in a fresh process without tflkit on the path; *reproduced* = "
        "it exits 1 with a line `REPRODUCED`. Software GPU (Mesa lavapipe), fp16. Faults "
        "planted in "
        + ", ".join(sorted({e["model"] for e in entries if e["kind"] == "planted"}))
        + " (`--model` plants them in others; `bench/validate_faults.py` plants them in every "
        "model and checks the localization).",
        "",
        f"{len(ran)} faults: {len(gpu)} localized on a GPU or the fp16 emulation, "
        f"{len(written)} repros written, **{len(reproduced)} of them reproduced** in a fresh "
        f"process by the script alone, the largest of {largest} ops. "
        f"{len(ran) - len(gpu)} localized against a `.tflite` reference (planted `weight` and "
        "`zero-point`: the model against the one it replaces, both on the CPU) get no repro by "
        "design, and say so in one line: the script shows CPU vs GPU on one model, and these "
        "are differences between two models with no GPU in them, for which the localization "
        "already names the op. *also in fp32*: the script run again with `enforce_f32=True` "
        "(no: the fault needs fp16; yes: the GPU is wrong whatever the precision). *s*: "
        "validate with localization and repro, plus the script.",
        "",
        "| fault | model | failing pairs | localized on | top culprit (op alone) | repro ops | "
        "reproduced | also in fp32 | s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(e) for e in ran]
    silent = [e for e in ran if not e["written"]]
    if silent:
        lines += ["", "Nothing written (the line `--repro` prints):", ""]
        lines += [f"- {e['fault']}, {e['model']}: {e['note']}" for e in silent]
    failed = [e for e in written if not e["reproduced"]]
    if failed:
        lines += ["", "Written but not reproduced by the script:", ""]
        lines += [f"- {e['fault']}, {e['model']}: {e['script_line']}" for e in failed]
    if written:
        lines += [
            "",
            "The worst element each script prints (fp16; in fp32: the same script with "
            "`enforce_f32=True`, the column *also in fp32*):",
            "",
        ]
        lines += [
            f"- {e['fault']}, {e['model']}: {e.get('worst') or e['script_line'][:160]}"
            + (f"; fp32: {e['fp32_worst']}" if e.get("fp32_worst") else "")
            for e in written
        ]
    skipped = [e for e in entries if "skipped" in e]
    if skipped:
        lines += [
            "",
            "Does not apply: "
            + "; ".join(f"{e['fault']} on {e['model']}" for e in skipped)
            + " (no float output, no float bias, or no quantized activation whose lost zero "
            "point changes the output).",
        ]
    errors = [e for e in entries if "error" in e]
    if errors:
        lines += ["", "Could not run:", ""]
        lines += [f"- {e['fault']}, {e['model']}: {e['error'][:200]}" for e in errors]
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs",
        type=Path,
        default=Path(tempfile.gettempdir()) / "tflkit-bench" / "repro_faults_runs.jsonl",
    )
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "repro.md")
    parser.add_argument(
        "--model", action="append", default=[], help="corpus model to plant faults in"
    )
    parser.add_argument("--only", action="append", default=[], help="substring of fault/model")
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args(argv)
    args.runs.parent.mkdir(parents=True, exist_ok=True)
    if not args.render_only:
        from tests.conftest_corpus import cache_root

        sweep(cache_root(), args.runs, args.model or list(PLANTED_MODELS), args.only)
    render(args.runs, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
