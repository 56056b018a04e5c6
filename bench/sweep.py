"""Sweep: every corpus model through the real CLI, as a new user would run it.

Run from the repo root (takes long: each GPU compile is tens of seconds on a software GPU)::

    PYTHONPATH=. python bench/sweep.py                          # generated + world corpus
    PYTHONPATH=. python bench/sweep.py --only openwakeword/ --only keras_
    PYTHONPATH=. python bench/sweep.py --render-only            # table from recorded runs

For each model it runs, as subprocesses of the installed ``tflkit`` with ``--json``:
``inspect``, ``check``, ``check --probe``, ``rewrite -o OUT``, ``check --probe`` on the
rewritten model when one was written (a rule fired or a dynamic batch was fixed), and
``validate -n 2 --timeout 120``. Each run (exit code, wall time, whether it hung or printed a
traceback, the JSON report) is appended to ``--runs`` (JSON lines, keyed by model, command and
tflkit commit), so an interrupted sweep resumes. After
every model it rewrites ``--out`` (default ``docs/sweep.md``): one row per model and the totals
(internal errors, hangs, model verdict agreement with the accelerator, per-op agreement, the
main graph's GPU op count from the checker next to the accelerator's, GPU residency before and
after ``rewrite``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 600.0
#: ``validate`` arguments: 2 input sets, at most 2 minutes per runner (a slow software-GPU
#: inference is reported by validate as that runner's timeout, not as a hang of the sweep).
VALIDATE_ARGS = ("-n", "2", "--timeout", "120")


@dataclass(frozen=True)
class Model:
    name: str
    path: Path
    tags: tuple[str, ...]


def corpus(only: list[str]) -> list[Model]:
    """Generated corpus, then the world corpus (fetched into the test cache)."""
    from tests.conftest_corpus import cache_root, ensure_generated, tensorflow_version
    from tests.corpus import generate
    from tests.corpus.fetch import fetch_world, world_tags
    from tests.corpus.tags import model_tags

    version = tensorflow_version()
    if version is None:
        raise SystemExit("sweep: TensorFlow is needed to generate the corpus")
    generated = ensure_generated(cache_root(), version)
    models = [Model(f"generated/{n}", generated / f"{n}.tflite", ()) for n in generate.GENERATORS]
    tags = world_tags()
    models += [
        Model(n, p, tuple(sorted(tags[n]))) for n, p in fetch_world(cache_root() / "real").items()
    ]
    models = [
        m if m.tags else Model(m.name, m.path, tuple(sorted(model_tags(m.path.read_bytes()))))
        for m in models
    ]
    return [m for m in models if not only or any(o in m.name for o in only)]


def commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return done.stdout.strip()

    head = git("rev-parse", "--short=10", "HEAD")
    dirty = git(
        "status", "--porcelain", "--untracked-files=no", "tflkit", "converters", "delegates"
    )
    return head + ("+dirty" if dirty else "")


def tflkit_command() -> list[str]:
    script = Path(sys.executable).parent / "tflkit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "tflkit.cli.main"]


@dataclass(frozen=True)
class Completed:
    """A CLI process's end: exit code (None when it hung and was killed), output, seconds."""

    code: int | None
    hung: bool
    seconds: float
    stdout: str
    stderr: str


def run_process(
    command: list[str], timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Completed:
    """Run ``command`` in its own session; kill its whole group when it outlives ``timeout``
    (and after it ends: no worker outlives a run)."""
    from tflkit.proc.worker import kill_group

    if env is None:
        env = dict(os.environ)
        env.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, cwd=cwd, start_new_session=True,
    )  # fmt: skip
    hung = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        hung = True
        kill_group(proc.pid)
        out, err = proc.communicate()
    finally:
        kill_group(proc.pid)
    return Completed(
        None if hung else proc.returncode,
        hung,
        round(time.perf_counter() - start, 2),
        out.decode("utf-8", "replace"),
        err.decode("utf-8", "replace"),
    )


def run_cli(args: list[str], timeout: float) -> dict[str, Any]:
    """One CLI run: exit code, seconds, hang, traceback, parsed ``--json`` stdout."""
    done = run_process(tflkit_command() + args, timeout)
    try:
        report = json.loads(done.stdout) if done.stdout.strip() else None
    except ValueError:
        report = None
    return {
        "code": done.code,
        "seconds": done.seconds,
        "hung": done.hung,
        "traceback": "Traceback (most recent call last)" in done.stderr,
        "stderr": done.stderr.strip().splitlines()[-3:],
        "report": report,
    }


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


class Runs:
    """Recorded runs (JSON lines), keyed by (model sha, command, commit)."""

    def __init__(self, path: Path, revision: str, ran_on: str) -> None:
        self.path = path
        self.revision = revision
        self.ran_on = ran_on  # the checkout new runs are made on (differs when resuming)
        self.done: dict[tuple[str, str], dict[str, Any]] = {}
        if path.is_file():
            for line in path.read_text().splitlines():
                entry = json.loads(line)
                if entry["commit"] == revision:
                    self.done[(entry["model"], entry["command"])] = entry

    def get(self, model: Model, command: str) -> dict[str, Any] | None:
        return self.done.get((model.name, command))

    def run(self, model: Model, command: str, args: list[str], timeout: float) -> dict[str, Any]:
        recorded = self.get(model, command)
        if recorded is not None:
            return recorded
        entry = {
            "model": model.name,
            "sha": _sha(model.path),
            "command": command,
            "commit": self.revision,
            "ran_on": self.ran_on,
            **run_cli(args, timeout),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(entry) + "\n")
        self.done[(model.name, command)] = entry
        return entry


def probe_model(model: Model, runs: Runs, workdir: Path, timeout: float) -> None:
    """The first pass: ``check --probe`` alone (the checker's and the accelerator's counts)."""
    runs.run(model, "probe", ["check", "--probe", "--json", str(model.path)], timeout)


def sweep_model(model: Model, runs: Runs, workdir: Path, timeout: float) -> None:
    path = str(model.path)
    runs.run(model, "inspect", ["inspect", "--json", path], timeout)
    runs.run(model, "check", ["check", "--json", path], timeout)
    runs.run(model, "probe", ["check", "--probe", "--json", path], timeout)
    out = workdir / (model.name.replace("/", "__") + ".rewritten.tflite")
    rewrite = runs.run(model, "rewrite", ["rewrite", "--json", "-o", str(out), path], timeout)
    report = rewrite.get("report") or {}
    if report.get("written") and out.is_file():  # written: a rule fired or a shape was fixed
        runs.run(model, "probe_after", ["check", "--probe", "--json", str(out)], timeout)
    runs.run(model, "validate", ["validate", "--json", *VALIDATE_ARGS, path], timeout)


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------
def _code(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "·"
    if entry["hung"]:
        return "**hang**"
    text = str(entry["code"])
    if entry["code"] == 3 or entry["traceback"]:
        return f"**{text}!**"
    return text


def _probe_cell(entry: dict[str, Any] | None) -> str:
    probe = ((entry or {}).get("report") or {}).get("probe") or {}
    if not probe:
        return _code(entry)
    on_gpu, on_cpu = probe.get("ops_on_gpu"), probe.get("ops_on_cpu")
    if on_gpu is None:  # no "N operations will run on the GPU" line: all of them, or none
        ops = "all" if probe.get("compiled") else "none"
    else:
        ops = f"{on_gpu}/{on_gpu + (on_cpu or 0)}"
    status = probe.get("status")
    return ops if status == "ok" else f"{status} {ops}"


def _op_counts(entry: dict[str, Any] | None) -> tuple[int | None, int | None]:
    """Main-graph ops on the GPU: the checker's partition simulation, and the accelerator's
    count: 0 when it refused the model (``compile_error``: the model cannot be created with the
    GPU, nothing runs there), None when it crashed or the run is missing."""
    report = (entry or {}).get("report") or {}
    probe = report.get("probe") or {}
    main = next((s for s in report.get("subgraphs") or () if s.get("index") == 0), None)
    static = main.get("gpu_ops") if main else None
    if probe.get("status") == "compile_error":
        return static, 0
    if probe.get("status") != "ok":
        return static, None
    probed = probe.get("ops_on_gpu")
    if probed is None and probe.get("compiled") and main:  # runs recorded before the fill
        probed = main.get("ops")
    return static, probed


def _counts_cell(static: int | None, probed: int | None) -> str:
    if static is None or probed is None:
        return "·" if static is None else f"{static} / ·"
    return f"{static} / {probed}" if static == probed else f"**{static} / {probed}**"


def _no_count(entry: dict[str, Any]) -> str:
    """Why the accelerator gave no op count: its crash, or the command's own error."""
    probe = (entry.get("report") or {}).get("probe") or {}
    crash = probe.get("crash") or {}
    if probe.get("status") == "crashed":
        where = f" at op #{crash['op_index']} {crash['op_type']}" if crash.get("op_type") else ""
        return f"the accelerator crashed{where}: {crash.get('message') or 'no message'}"
    last = (entry.get("stderr") or ["no message"])[-1]
    return f"exit {entry['code']}: {last.removeprefix('tflkit: error: ')}"


def _counts_agree(static: int | None, probed: int | None) -> str:
    """'yes' / '**no**', '·' where the accelerator compiled nothing to count."""
    if static is None or probed is None:
        return "·"
    return "yes" if static == probed else "**no**"


def _agreement(entry: dict[str, Any] | None) -> tuple[bool | None, int, int]:
    probe = ((entry or {}).get("report") or {}).get("probe") or {}
    return probe.get("model_agrees"), probe.get("agree") or 0, probe.get("compared") or 0


def _static(report: dict[str, Any], key: str) -> str:
    side = report.get(key) or {}
    return f"{side.get('gpu_ops', '?')}/{side.get('total_ops', '?')}"


def render(models: list[Model], runs: Runs, seconds: float) -> str:
    rows, totals = [], {"internal": 0, "hangs": 0, "runs": 0}
    model_votes = [0, 0]  # agreeing, compared
    ops = [0, 0]
    residency = [0, 0, 0, 0]  # static: GPU ops and all ops before rewrite, then after
    full = [0, 0]  # models with every op on the GPU (static), before and after rewrite
    counts = [0, 0]  # models whose main-graph GPU op count matches the accelerator's, probed
    counts_after = [0, 0]  # the same on the rewritten models
    refused, uncounted = 0, []  # counted as 0 (compile_error); no count (crash, not loadable)
    for model in models:
        entries = {c: runs.get(model, c) for c in COMMANDS}
        present = [e for e in entries.values() if e is not None]
        totals["runs"] += len(present)
        totals["internal"] += sum(1 for e in present if e["code"] == 3 or e["traceback"])
        totals["hangs"] += sum(1 for e in present if e["hung"])
        agrees, agree, compared = _agreement(entries["probe"])
        static_ops, probed_ops = _op_counts(entries["probe"])
        if static_ops is not None and probed_ops is not None:
            counts[0] += static_ops == probed_ops
            counts[1] += 1
            refused += (
                probed_ops == 0
                and (entries["probe"] or {})["report"]["probe"]["status"] == "compile_error"
            )
        elif entries["probe"] is not None:
            uncounted.append(f"`{model.name}` ({_no_count(entries['probe'])})")
        static_after, probed_after = _op_counts(entries["probe_after"])
        if static_after is not None and probed_after is not None:
            counts_after[0] += static_after == probed_after
            counts_after[1] += 1
        if agrees is not None:
            model_votes[0] += bool(agrees)
            model_votes[1] += 1
        ops[0] += agree
        ops[1] += compared
        rewrite = (entries["rewrite"] or {}).get("report") or {}
        before, after = _static(rewrite, "static_before"), _static(rewrite, "static_after")
        if rewrite.get("static_before") and rewrite.get("static_after"):
            residency[0] += rewrite["static_before"]["gpu_ops"]
            residency[1] += rewrite["static_before"]["total_ops"]
            residency[2] += rewrite["static_after"]["gpu_ops"]
            residency[3] += rewrite["static_after"]["total_ops"]
            for i, key in enumerate(("static_before", "static_after")):
                full[i] += rewrite[key]["gpu_ops"] == rewrite[key]["total_ops"]
        validate = (entries["validate"] or {}).get("report") or {}
        wall = sum(e["seconds"] for e in present)
        rows.append(
            "| "
            + " | ".join(
                [
                    f"`{model.name}`",
                    " ".join(model.tags),
                    _code(entries["inspect"]),
                    _code(entries["check"]),
                    _probe_cell(entries["probe"]),
                    _counts_cell(static_ops, probed_ops),
                    _counts_agree(static_ops, probed_ops),
                    "·" if agrees is None else ("yes" if agrees else "**no**"),
                    f"{agree}/{compared}" if compared else "·",
                    _code(entries["rewrite"]),
                    f"{before} → {after}" if rewrite else "·",
                    _probe_cell(entries["probe_after"]) if entries["probe_after"] else "·",
                    f"{_code(entries['validate'])} {validate.get('verdict', '')}".strip(),
                    f"{wall:.0f}",
                ]
            )
            + " |"
        )
    done = sum(1 for m in models if runs.get(m, "validate") is not None)
    probed = sum(1 for m in models if runs.get(m, "probe") is not None)
    spent = sum(e["seconds"] for m in models for c in COMMANDS if (e := runs.get(m, c)))
    checkouts = sorted({e.get("ran_on", e["commit"]) for e in runs.done.values()})
    model_rate = f"{100 * model_votes[0] / model_votes[1]:.1f}%" if model_votes[1] else "n/a"
    op_rate = f"{100 * ops[0] / ops[1]:.2f}%" if ops[1] else "n/a"
    header = [
        "# Corpus sweep: every command on every corpus model",
        "",
        "Produced by `PYTHONPATH=. python bench/sweep.py` on tflkit "
        + ", ".join(f"`{c}`" for c in checkouts)
        + " (`+dirty`: with the other work in progress in the checkout) "
        f"({probed} of {len(models)} models probed, {done} through every command; "
        f"{spent / 60:.0f} min of command runs, {seconds / 60:.0f} in this run). Software "
        "GPU (Mesa lavapipe); `validate` with `-n 2 --timeout 120` (per runner). The corpus: the "
        "generated models (`tests/corpus/generate.py`) and the world's models "
        "(`tests/corpus/README.md`).",
        "",
        "## Totals",
        "",
        f"- command runs: {totals['runs']}; internal errors (exit 3 or a traceback): "
        f"**{totals['internal']}**; hangs (over {TIMEOUT_S:.0f} s): **{totals['hangs']}**",
        f"- model verdict agreement with the accelerator (`check --probe`, `model_agrees`): "
        f"{model_votes[0]}/{model_votes[1]} = **{model_rate}**",
        f"- per-op agreement with the accelerator: {ops[0]}/{ops[1]} = **{op_rate}**",
        f"- main-graph GPU op count, checker = accelerator: **{counts[0]}/{counts[1]}** models "
        f"({refused} of them refused whole by the accelerator, `compile_error`: 0 ops on the "
        "GPU); no count on "
        + (", ".join(uncounted) or "none")
        + f"; on the models `rewrite` wrote: {counts_after[0]}/{counts_after[1]}",
        f"- GPU residency (static checker, all models): {residency[0]}/{residency[1]} ops on the "
        f"GPU before `rewrite`, {residency[2]}/{residency[3]} after; fully on the GPU: "
        f"{full[0]} models before, {full[1]} after",
        "",
        "## Per model",
        "",
        "Columns: exit code of each command (`3!` = internal error, `hang` = killed after the "
        "timeout, `·` = not run); *probe* = ops the accelerator runs on the GPU / ops in its "
        "main graph; *GPU ops static / probe* = main-graph ops on the GPU per the checker's "
        "partition simulation / per the accelerator (bold when they differ); *counts agree* = "
        "the two counts are equal (`·`: the accelerator compiled nothing to count); *agrees* = the "
        "static verdict on whether the model compiles matches the "
        "accelerator; *per-op* = ops whose static verdict matches the probe / ops compared; "
        "*static GPU ops* = ops on the GPU per the checker before → after `rewrite`; *probe "
        "after* = the accelerator on the rewritten model (only when one was written); *s* = wall "
        "seconds of all commands.",
        "",
        "| model | tags | inspect | check | probe | GPU ops static / probe | counts agree "
        "| agrees | per-op | rewrite | static GPU ops | probe after | validate | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join(header + rows) + "\n"


COMMANDS = ("inspect", "check", "probe", "rewrite", "probe_after", "validate")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], help="model name substring")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "sweep.md")
    parser.add_argument(
        "--runs", type=Path, default=Path(tempfile.gettempdir()) / "tflkit-sweep" / "runs.jsonl"
    )
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S)
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--commit", help="label of the runs to resume or render (default: HEAD)")
    args = parser.parse_args(argv)
    models = corpus(args.only)
    head = commit()
    runs = Runs(args.runs, args.commit or head, head)
    from tflkit.fsio import write_atomic

    start = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="tflkit-sweep-"))
    # Two passes: `check --probe` (the op counts) on every model first, then the other commands.
    passes = [] if args.render_only else [("probe", probe_model), ("all", sweep_model)]
    for label, step in passes:
        for i, model in enumerate(models):
            print(f"[{label} {i + 1}/{len(models)}] {model.name}", file=sys.stderr, flush=True)
            step(model, runs, workdir, args.timeout)
            write_atomic(args.out, [render(models, runs, time.perf_counter() - start).encode()])
    write_atomic(args.out, [render(models, runs, time.perf_counter() - start).encode()])
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
