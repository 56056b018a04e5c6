"""A suite file (``tflkit.toml``): the models of a repository, their inputs, runners, tolerances
and baselines; run as work items (:mod:`tflkit.regress.items`) in parallel processes.

A ``[defaults]`` table (every key can be set per model too: runners, probe, jobs, tolerances,
...) and one ``[[models]]`` table per model (``path`` and ``baseline`` relative to the suite
file, optional ``inputs``, ``latency_budget``): the format, with an example, is in
``docs/regress.md`` ("Suites").
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tflkit.errors import UsageError
from tflkit.jsonable import dumps
from tflkit.regress.items import (
    ALL_RUNNERS,
    PINNED,
    RESIDENCY,
    WorkItem,
    assemble,
    file_sha256,
    shard_of,
)
from tflkit.regress.journal import Journal
from tflkit.report.regress_report import ModelResult, RegressReport

__all__ = [
    "Suite",
    "SuiteModel",
    "check_entry",
    "load_suite",
    "plan_items",
    "record_entry",
    "run_suite",
]

_MODEL_KEYS = {
    "name",
    "path",
    "baseline",
    "inputs",
    "runners",
    "tolerances",
    "probe",
    "num_inputs",
    "seed",
    "input_shapes",
    "signature",
    "latency",
    "latency_budget",
    "timeout",
    "target",
}
_DEFAULT_KEYS = (_MODEL_KEYS - {"name", "path", "baseline", "inputs"}) | {"jobs"}
_RESULT_PREFIX = "TFLKIT-REGRESS-RESULT "


@dataclass
class SuiteModel:
    """One model of a suite, with paths resolved against the suite file."""

    name: str
    path: Path
    baseline: Path
    settings: dict[str, Any] = field(default_factory=dict)

    def record_options(self) -> Any:
        from tflkit.regress.record import RecordOptions

        s = self.settings
        return RecordOptions(
            runners=list(s.get("runners", ())),
            inputs=s.get("inputs"),
            num_inputs=int(s.get("num_inputs", 4)),
            seed=int(s.get("seed", 0)),
            input_shapes={k: tuple(v) for k, v in s.get("input_shapes", {}).items()},
            signature=s.get("signature"),
            tolerances=s.get("tolerances", {}),
            probe=bool(s.get("probe", True)),
            target=s.get("target"),
            latency=bool(s.get("latency", False)),
            timeout=float(s.get("timeout", 300.0)),
        )

    def check_options(self) -> Any:
        from tflkit.regress.check import CheckOptions

        s = self.settings
        budget = s.get("latency_budget")
        return CheckOptions(
            runners=list(s.get("runners", ())),
            tolerances=s.get("tolerances", {}),
            probe=s.get("probe"),
            latency_budget=float(budget) if budget is not None else None,
            timeout=float(s.get("timeout", 300.0)),
        )


@dataclass
class Suite:
    path: Path
    models: list[SuiteModel]
    jobs: int

    def model(self, name: str) -> SuiteModel:
        for entry in self.models:
            if entry.name == name:
                return entry
        raise UsageError(f"{self.path}: no model named {name!r}")


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{where} must be a table")
    return value


def load_suite(path: str | os.PathLike[str]) -> Suite:
    """Parse and check a suite file; every mistake is a :class:`UsageError` naming the key."""
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"suite file {file} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read suite file {file}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{file}: invalid TOML: {exc}") from None
    unknown = set(data) - {"defaults", "models"}
    if unknown:
        raise UsageError(f"{file}: unknown top-level key(s) {sorted(unknown)}")
    defaults = _table(data.get("defaults", {}), f"{file}: [defaults]")
    bad = set(defaults) - _DEFAULT_KEYS
    if bad:
        raise UsageError(f"{file}: unknown key(s) {sorted(bad)} in [defaults]")
    entries = data.get("models")
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{file}: no [[models]] entries")
    root = file.resolve().parent
    models: list[SuiteModel] = []
    for k, raw in enumerate(entries):
        entry = _table(raw, f"{file}: models[{k}]")
        bad = set(entry) - _MODEL_KEYS
        if bad:
            raise UsageError(f"{file}: unknown key(s) {sorted(bad)} in models[{k}]")
        for key in ("path", "baseline"):
            if not isinstance(entry.get(key), str):
                raise UsageError(f"{file}: models[{k}] needs a {key!r} (a path)")
        settings = {**{k2: v for k2, v in defaults.items() if k2 != "jobs"}, **entry}
        if settings.get("inputs") is not None:
            settings["inputs"] = root / settings["inputs"]
        model_path = root / entry["path"]
        name = str(entry.get("name") or model_path.stem)
        if any(m.name == name for m in models):
            raise UsageError(f"{file}: two models are named {name!r}; set distinct 'name's")
        models.append(SuiteModel(name, model_path, root / entry["baseline"], settings))
    jobs = defaults.get("jobs", os.cpu_count() or 1)
    if not isinstance(jobs, int) or jobs < 1:
        raise UsageError(f"{file}: [defaults] jobs must be a positive integer")
    return Suite(file, models, jobs)


def check_entry(entry: SuiteModel, runner: str = ALL_RUNNERS, runtime: str = "") -> ModelResult:
    """Check one suite model (one runner of it, its residency, or all; with the ``runtime``
    spec's runtime when given) in this process; a usage error becomes an "error" result."""
    from dataclasses import replace

    from tflkit.errors import TflkitError
    from tflkit.regress.check import check

    options = entry.check_options()
    if runtime:
        from tflkit.regress.runtimes import ensure_runtime

        options = replace(options, runtime=ensure_runtime(runtime))
    if runner == RESIDENCY:
        options = replace(options, outputs=False)
    elif runner != ALL_RUNNERS:
        options = replace(options, runners=[runner], residency=False)
    try:
        return check(entry.path, entry.baseline, options)
    except TflkitError as exc:
        return ModelResult(str(entry.path), str(entry.baseline), "error", error=str(exc))


def record_entry(entry: SuiteModel, *, force: bool = False) -> ModelResult:
    """Record one suite model's baseline (kept when it exists, unless ``force``)."""
    from tflkit.errors import TflkitError
    from tflkit.regress.baseline import write_baseline
    from tflkit.regress.record import record

    result = ModelResult(str(entry.path), str(entry.baseline), "pass")
    if (entry.baseline / "manifest.json").is_file() and not force:
        result.changes.append("baseline exists; kept (use `regress update` to replace it)")
        return result
    try:
        write_baseline(record(entry.path, entry.record_options()), entry.baseline)
        result.changes.append("baseline recorded")
    except TflkitError as exc:
        result.verdict, result.error = "error", str(exc)
    return result


def _baseline_runners(entry: SuiteModel) -> tuple[list[str], str]:
    """The runners a check of ``entry`` runs (its baseline's, narrowed by the suite) and the
    manifest's sha256; ([], "") when there is no readable baseline (the check says why)."""
    manifest = entry.baseline / "manifest.json"
    try:
        recorded = list(json.loads(manifest.read_text(encoding="utf-8"))["runners"])
    except (OSError, ValueError, KeyError, TypeError):
        return [], ""
    wanted = list(entry.settings.get("runners", ())) or recorded
    return wanted, file_sha256(str(manifest))


def plan_items(
    suite: Suite, mode: str, names: Sequence[str] = (), runtimes: Sequence[Any] = ()
) -> list[WorkItem]:
    """Every work item of the suite (or of the ``names`` models), in suite order; with
    ``runtimes`` (:class:`tflkit.harness.runtimes.RuntimeEnv`), each model's runners on each
    (their GPU residency is in the runs), else on the pinned runtime."""
    entries = [suite.model(n) for n in names] if names else suite.models
    items = []
    for entry in entries:
        if runtimes:
            items += _runtime_items(entry, mode, runtimes)
            continue
        base = {
            "entry": entry.name,
            "model": str(entry.path),
            "baseline": str(entry.baseline),
            "model_sha256": file_sha256(str(entry.path)),
            "runtime": PINNED,
            "mode": mode,
        }
        if mode != "check":
            items.append(WorkItem(**base, runner=ALL_RUNNERS))
            continue
        runners, manifest_sha = _baseline_runners(entry)
        if not runners:
            items.append(WorkItem(**base, runner=ALL_RUNNERS))
            continue
        for runner in [*runners, RESIDENCY]:
            items.append(WorkItem(**base, runner=runner, baseline_sha256=manifest_sha))
    return items


def _runtime_items(entry: SuiteModel, mode: str, runtimes: Sequence[Any]) -> list[WorkItem]:
    if mode != "check":
        raise UsageError("--runtime with --suite runs `regress check`; record with one runtime")
    runners, manifest_sha = _baseline_runners(entry)
    model_sha = file_sha256(str(entry.path))
    return [
        WorkItem(
            entry.name,
            str(entry.path),
            str(entry.baseline),
            model_sha,
            runtime.label,
            runner,
            mode,
            manifest_sha,
            runtime.spec,
        )
        for runtime in runtimes
        for runner in runners or [ALL_RUNNERS]
    ]


def run_child(
    suite: str | os.PathLike[str], item: WorkItem, timeout: float
) -> tuple[ModelResult, bool]:
    """Run ``item`` of the suite file ``suite`` in a child process: (its result, whether the
    child died without one)."""
    from tflkit.proc.worker import spawn_python

    path = Path(suite).resolve()
    raw = dumps(item, indent=None)
    done = spawn_python(child_main, path, raw, os.getpid(), cwd=path.parent, timeout=timeout)
    for line in reversed(done.output.splitlines()):
        if line.startswith(_RESULT_PREFIX):
            return ModelResult.from_json(json.loads(line[len(_RESULT_PREFIX) :])), False
    tail = done.last_line or "no output"
    what = f"{item.entry} ({item.runner})"
    error = f"the worker for {what} ended ({done.how}) without a result: {tail}"
    return ModelResult(item.model, item.baseline, "error", error=error), True


def default_results(suite: Suite, mode: str, shard: tuple[int, int] | None) -> Path:
    """Where a run keeps its results when no ``--results`` is given (removed once complete)."""
    tail = f"-shard-{shard[0]}of{shard[1]}" if shard else ""
    return suite.path.resolve().parent / ".tflkit" / f"{mode}{tail}.results.jsonl"


def run_suite(
    suite: Suite,
    *,
    mode: str = "check",
    jobs: int | None = None,
    names: Sequence[str] = (),
    progress: Callable[[WorkItem, ModelResult], None] | None = None,
    timeout: float = 3600.0,
    shard: tuple[int, int] | None = None,
    results: Path | None = None,
    fresh: bool = False,
    runtimes: Sequence[Any] = (),
    cluster: str | None = None,
    tries: int = 3,
) -> RegressReport:
    """Check (or record) the suite's items (or shard ``shard`` of them), ``jobs`` child
    processes at a time; finished results go to the results file as they come (``results``, or
    a default one removed once the run is complete). An interrupt kills the running children,
    keeps the finished results and propagates. ``cluster``: run the items as Ray tasks there
    (:mod:`tflkit.regress.ray_pool`), each tried up to ``tries`` times."""
    from tflkit.regress.pool import run_items

    every = plan_items(suite, mode, names, runtimes)
    path = results or default_results(suite, mode, shard)
    journal = Journal.open(path, str(suite.path), mode, every, shard, fresh=fresh)
    mine = shard_of(every, shard)
    todo = [item for item in mine if not journal.finished(item)]

    def one(item: WorkItem) -> tuple[ModelResult, bool]:
        return run_child(suite.path, item, timeout)

    def done(item: WorkItem, result: ModelResult, lost: bool) -> None:
        journal.add(item, result, retry=lost)
        if progress is not None:
            progress(item, result)

    if cluster is not None:
        from tflkit.regress.ray_pool import connect, run_items_on_ray

        # Ray prints its own lines (a task retried) to stdout: keep stdout for the report
        with contextlib.redirect_stdout(sys.stderr):
            ray = connect(cluster)
            try:
                where = str(suite.path.resolve())
                run_items_on_ray(ray, todo, where, run_child, done, timeout=timeout, tries=tries)
            finally:
                ray.shutdown()
    else:
        run_items(todo, one, done, workers=jobs or suite.jobs)
    report = assemble(mine, journal.results, str(suite.path))
    if results is None and all(journal.finished(item) for item in mine):
        path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the default folder, when nothing else is in it
            path.parent.rmdir()
    return report


def _exit_with(parent: int) -> None:
    """End this child (and its own workers) when ``parent`` is gone: a Ray worker killed with
    its node cannot kill its child's session itself."""
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        from tflkit.proc.worker import kill_sessions

        kill_sessions()
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def child_main(argv: Sequence[str]) -> int:
    """Child process (:func:`tflkit.proc.worker.spawn_python`): ``SUITE ITEM_JSON PARENT_PID``."""
    suite_path, raw, parent = argv
    _exit_with(int(parent))
    item = WorkItem.from_json(json.loads(raw))
    entry = load_suite(suite_path).model(item.entry)
    if item.mode == "check":
        result = check_entry(entry, item.runner, item.runtime_spec)
    else:
        result = record_entry(entry, force=item.mode == "record-force")
    sys.stdout.flush()
    print(_RESULT_PREFIX + dumps(result, indent=None), flush=True)
    return 0
