"""Run a CI example's steps here, in order, as its runner would: the ``run:`` steps of a GitHub
Actions workflow (``docs/ci/github-actions.yml``) or a GitLab CI job's ``before_script`` and
``script`` (``docs/ci/gitlab-ci.yml``), each with ``bash -e -o pipefail`` in a fresh directory,
with the file's own environment and ``TFLKIT_PACKAGE`` set to the package under test (the wheel
just built) instead of the published name.

``uses:`` steps (``actions/checkout``, ``upload-artifact``) are the hosting service's: they are
listed as skipped; the directory stands in for the checkout (the caller puts the user's models
there), and the artifacts are the files the steps leave in it.

    python -m tests.ci_steps docs/ci/github-actions.yml --package dist/tflkit-0.1.0-*.whl \
        --dir DIR --path VENV/bin
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Step", "read_steps", "run_steps"]

PACKAGE_VAR = "TFLKIT_PACKAGE"


@dataclass
class Step:
    """One shell step: its name, the script, the environment the file gives it."""

    name: str
    script: str | None  # None: a ``uses:`` step, not run here
    env: dict[str, str] = field(default_factory=dict)
    always: bool = False  # ``if: always()`` / GitLab's after_script


def _strings(mapping: dict[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (mapping or {}).items()}


def _github(doc: dict[str, Any]) -> list[Step]:
    steps = []
    top = _strings(doc.get("env"))
    for job in doc["jobs"].values():
        env = {**top, **_strings(job.get("env"))}
        for step in job["steps"]:
            name = step.get("name") or step.get("uses") or step.get("run", "").splitlines()[0]
            script = step.get("run")
            steps.append(
                Step(
                    name,
                    script,
                    {**env, **_strings(step.get("env"))},
                    always="always()" in str(step.get("if", "")),
                )
            )
    return steps


def _gitlab(doc: dict[str, Any]) -> list[Step]:
    steps = []
    top = _strings(doc.get("variables"))
    for name, job in doc.items():
        if not isinstance(job, dict) or "script" not in job:
            continue
        env = {**top, **_strings(job.get("variables"))}
        for part in ("before_script", "script"):
            for i, line in enumerate(job.get(part, [])):
                steps.append(Step(f"{name}:{part}[{i}]", str(line), env))
        for i, line in enumerate(job.get("after_script", [])):
            steps.append(Step(f"{name}:after_script[{i}]", str(line), env, always=True))
    return steps


def read_steps(path: Path) -> list[Step]:
    """The steps of a GitHub Actions workflow (it has ``jobs:``) or a GitLab CI file."""
    doc = yaml.safe_load(path.read_text())
    return _github(doc) if "jobs" in doc else _gitlab(doc)


def run_steps(
    steps: list[Step],
    workdir: Path,
    package: str,
    base_env: dict[str, str] | None = None,
    log: Any = sys.stdout,
) -> list[tuple[Step, int | None]]:
    """Each step in ``workdir``, in order, in ``base_env`` (default: this process's) plus the
    file's; after a failure only the ``always`` ones run. Returns (step, exit code; None:
    skipped)."""
    results: list[tuple[Step, int | None]] = []
    failed = False
    for step in steps:
        if step.script is None or (failed and not step.always):
            print(f"--- skipped: {step.name}", file=log, flush=True)
            results.append((step, None))
            continue
        env = {**(os.environ if base_env is None else base_env), **step.env, PACKAGE_VAR: package}
        env.setdefault("GITHUB_STEP_SUMMARY", str(workdir / "step-summary.md"))
        print(f"--- {step.name}", file=log, flush=True)
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", step.script],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        print(f"--- exit {done.returncode}: {step.name}", file=log, flush=True)
        results.append((step, done.returncode))
        failed = failed or done.returncode != 0
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--package", required=True, help="what pip installs (a wheel's path)")
    parser.add_argument("--dir", type=Path, required=True, help="the fresh directory")
    parser.add_argument("--path", default="", help="put first on PATH (a venv's bin)")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if args.path:
        env["PATH"] = f"{args.path}{os.pathsep}{env.get('PATH', '')}"
    results = run_steps(read_steps(args.file), args.dir, args.package, env)
    return 1 if any(code not in (0, None) for _, code in results) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
