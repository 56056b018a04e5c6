"""pytest plugin (entry point ``pytest11``): a ``tflkit`` fixture and ``tflkit.toml`` suites as
test items.

It loads in every pytest run of every user who installed tflkit, so it imports only pytest and the
standard library here; each assertion imports what it needs when called.

```python
def test_detector(tflkit):
    tflkit.assert_gpu_ready("models/detector.tflite")
    tflkit.assert_matches_baseline("models/detector.tflite", "baselines/detector")
    tflkit.assert_validates("models/detector.tflite", reference="exported/detector.keras")
```

A ``tflkit.toml`` inside the collected paths (or given on the command line) becomes one test item
per model, so ``pytest -n auto`` (pytest-xdist) spreads the models over cores or hosts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

SUITE_FILE = "tflkit.toml"


class TflkitAssertion(AssertionError):
    """A failed tflkit assertion; its message is the report (pytest shows it without a trace)."""


class Tflkit:
    """The ``tflkit`` fixture: assertions over models, each raising :class:`TflkitAssertion`."""

    def assert_gpu_ready(
        self, path: str | os.PathLike[str], *, probe: bool = True, target: str | None = None
    ) -> None:
        """Every op runs on the GPU (statically and, with ``probe``, on the real accelerator);
        the message names each op that falls back and why."""
        __tracebackhide__ = True
        from tflkit.regress.residency import snapshot

        res = snapshot(path, target=target, probe=probe)
        static, probed = res["static"], res["probe"]
        fallbacks = static["cpu_ops"]
        lines = []
        if not static["compiles"]:
            lines.append("the GPU delegate cannot compile the model at all")
        for op in static["ops_on_cpu"]:
            lines.append(f"{op['type']} (op {op['index']}): {'; '.join(op['reasons'])}")
        if probed is not None:
            if probed["status"] != "ok":
                crash = probed.get("crash")
                where = f" at {crash['op_type']} (op {crash['op_index']})" if crash else ""
                lines.append(
                    f"the GPU accelerator: {probed['status']}{where}: "
                    f"{probed.get('error') or (crash or {}).get('message') or ''}".rstrip(": ")
                )
            seen = {(op["subgraph"], op["index"]) for op in static["ops_on_cpu"]}
            for op in probed["rejected"]:
                if (op["subgraph"], op["index"]) not in seen:
                    fallbacks += 1
                    lines.append(
                        f"{op['type']} (op {op['index']}), said the accelerator: "
                        f"{'; '.join(op['reasons'])}"
                    )
        if lines:
            head = (
                f"{Path(path).name} is not GPU-ready: {fallbacks} of "
                f"{static['total_ops']} ops fall back to the CPU"
            )
            raise TflkitAssertion(head + "".join(f"\n  {line}" for line in lines))

    def assert_matches_baseline(
        self,
        path: str | os.PathLike[str],
        baseline_dir: str | os.PathLike[str],
        *,
        runners: Sequence[str] = (),
        probe: bool | None = None,
        latency_budget: float | None = None,
    ) -> Any:
        """Outputs, residency (and latency with a budget) hold against the baseline; the message
        says which runner, output and metric moved, and by how much. Returns the result."""
        __tracebackhide__ = True
        from tflkit.regress.check import CheckOptions, check

        result = check(
            path,
            baseline_dir,
            CheckOptions(runners=runners, probe=probe, latency_budget=latency_budget),
        )
        if result.failures:
            raise TflkitAssertion(_describe(result))
        return result

    def assert_validates(
        self,
        path: str | os.PathLike[str],
        *,
        reference: str | os.PathLike[str] | None = None,
        runners: Sequence[str] = (),
        **options: Any,
    ) -> Any:
        """``tflkit.validate`` passes (GPU vs CPU, and vs the ``reference`` when given); the
        message lists each finding. Extra keywords go to ``ValidateOptions``."""
        __tracebackhide__ = True
        from tflkit.validation.pipeline import ValidateOptions, validate

        report = validate(
            path,
            ValidateOptions(
                runners=list(runners), reference=Path(reference) if reference else None, **options
            ),
        )
        if not report.passed:
            lines = report.findings + report.unverified
            raise TflkitAssertion(
                f"{Path(path).name} does not validate ({report.verdict}):"
                + "".join(f"\n  {line}" for line in lines)
            )
        return report


def _describe(result: Any) -> str:
    failures = result.failures
    lines = [
        f"{Path(result.model).name} regressed against {result.baseline}: "
        f"{len(failures)} check(s) failed"
    ]
    for case in failures:
        lines.append(f"  {case.name}: {case.message}")
    lines += [f"  changed: {change}" for change in result.changes]
    return "\n".join(lines)


@pytest.fixture
def tflkit() -> Tflkit:
    """Assertions over models: ``assert_gpu_ready``, ``assert_matches_baseline``,
    ``assert_validates``."""
    return Tflkit()


class SuiteFile(pytest.File):
    """A ``tflkit.toml``: one item per model."""

    def collect(self) -> Iterator[pytest.Item]:
        from tflkit.errors import TflkitError
        from tflkit.regress.suite import load_suite

        try:
            suite = load_suite(self.path)
        except TflkitError as exc:
            raise self.CollectError(str(exc)) from None
        for entry in suite.models:
            yield SuiteItem.from_parent(self, name=entry.name, entry=entry)


class SuiteItem(pytest.Item):
    """One model of a suite checked against its baseline."""

    def __init__(self, *, entry: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entry = entry
        self.add_marker("tflkit")

    def runtest(self) -> None:
        from tflkit.regress.suite import check_entry

        result = check_entry(self.entry)
        if result.verdict == "error":
            raise TflkitAssertion(f"{self.entry.name}: cannot check: {result.error}")
        if result.failures:
            raise TflkitAssertion(_describe(result))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        if isinstance(excinfo.value, TflkitAssertion):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"tflkit model {self.name}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tflkit: a model of a tflkit.toml suite (tflkit regress)")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> SuiteFile | None:
    if file_path.name == SUITE_FILE:
        return SuiteFile.from_parent(parent, path=file_path)
    return None
