"""A suite file (``tflkit.toml``): the models of a repository, their inputs, runners, tolerances
and baselines; run in parallel processes, one per model.

A ``[defaults]`` table (every key can be set per model too: runners, probe, jobs, tolerances,
...) and one ``[[models]]`` table per model (``path`` and ``baseline`` relative to the suite
file, optional ``inputs``, ``latency_budget``): the format, with an example, is in
``docs/regress.md`` ("Suites").
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tflkit.errors import UsageError
from tflkit.jsonable import dumps
from tflkit.report.regress_report import ModelResult, RegressReport

__all__ = ["Suite", "SuiteModel", "check_entry", "load_suite", "record_entry", "run_suite"]

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


def check_entry(entry: SuiteModel) -> ModelResult:
    """Check one suite model in this process; a usage error becomes an "error" result."""
    from tflkit.errors import TflkitError
    from tflkit.regress.check import check

    try:
        return check(entry.path, entry.baseline, entry.check_options())
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


def _in_child(suite: Suite, entry: SuiteModel, mode: str, timeout: float) -> ModelResult:
    from tflkit.proc.worker import run_worker

    cmd = [sys.executable, "-m", "tflkit.regress.suite", mode, str(suite.path), entry.name]
    done = run_worker(cmd, cwd=suite.path.resolve().parent, timeout=timeout)
    for line in reversed(done.output.splitlines()):
        if line.startswith(_RESULT_PREFIX):
            return ModelResult.from_json(json.loads(line[len(_RESULT_PREFIX) :]))
    tail = done.last_line or "no output"
    return ModelResult(
        str(entry.path),
        str(entry.baseline),
        "error",
        error=f"the worker for {entry.name} ended ({done.how}) without a result: {tail}",
    )


def run_suite(
    suite: Suite,
    *,
    mode: str = "check",
    jobs: int | None = None,
    names: Sequence[str] = (),
    progress: Callable[[ModelResult], None] | None = None,
    timeout: float = 3600.0,
) -> RegressReport:
    """Check (or record) every model, ``jobs`` child processes at a time, in suite order."""
    entries = [suite.model(n) for n in names] if names else suite.models
    workers = max(1, min(jobs or suite.jobs, len(entries)))

    def one(entry: SuiteModel) -> ModelResult:
        result = _in_child(suite, entry, mode, timeout)
        if progress is not None:
            progress(result)
        return result

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, entries))
    return RegressReport(results, suite=str(suite.path))


def _main(argv: Sequence[str]) -> int:
    """Child process: ``python -m tflkit.regress.suite check|record|record-force SUITE NAME``."""
    mode, suite_path, name = argv
    entry = load_suite(suite_path).model(name)
    if mode == "check":
        result = check_entry(entry)
    else:
        result = record_entry(entry, force=mode == "record-force")
    sys.stdout.flush()
    print(_RESULT_PREFIX + dumps(result, indent=None), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
