"""Isolated converter environments (onnx2tf, litert-torch), built on first use in the user's cache.

Each route's converter pins packages that clash with tflkit's own environment (onnx2tf 1.29 pins
numpy 1.26 and TensorFlow 2.19), so it gets its own venv under
``$XDG_CACHE_HOME/tflkit/converters`` (default ``~/.cache/tflkit/converters``;
``$TFLKIT_CONVERTERS_DIR`` overrides). A venv's directory name carries its Python and a hash of
its pins: new pins build a new venv, old ones stay until removed. A file lock keeps two commands
from building the same venv at once; ``tflkit-env.json`` is written last and marks it ready.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tflkit.fsio import exclusive_lock, write_atomic
from tflkit.report.progress import Progress

from ._progress import BuildProgress, pip_step
from .base import MissingExtraError

__all__ = [
    "ROUTES",
    "ConverterEnv",
    "EnvSpec",
    "IndexUnreachableError",
    "base_for",
    "converters_dir",
    "ensure_env",
    "ensure_spec_env",
    "find_env",
    "installed_envs",
    "select_spec",
]

MARKER = "tflkit-env.json"
DIR_ENV = "TFLKIT_CONVERTERS_DIR"


@dataclass(frozen=True)
class EnvSpec:
    """One way to build a route's environment: pinned packages for a range of Pythons."""

    route: str
    packages: tuple[str, ...]
    modules: tuple[str, ...]
    python_min: tuple[int, int]
    python_max: tuple[int, int]
    note: str = ""
    #: installed after ``packages`` without their dependencies (whose pins would pull builds
    #: this environment must not have)
    no_deps: tuple[str, ...] = ()
    #: what the environment is for, in messages ("converter"; "runtime" for a runtime matrix)
    kind: str = "converter"

    @property
    def label(self) -> str:
        return f"{self.route} {self.kind}"

    def fits(self, version: tuple[int, int]) -> bool:
        return self.python_min <= version <= self.python_max

    @property
    def pythons(self) -> str:
        low, high = self.python_min, self.python_max
        return f"{low[0]}.{low[1]}" + (f"-{high[0]}.{high[1]}" if high != low else "")

    def dirname(self, version: tuple[int, int]) -> str:
        pins = self.packages + tuple(f"--no-deps {p}" for p in self.no_deps)
        key = hashlib.sha256("\n".join(pins).encode()).hexdigest()[:10]
        return f"{self.route}-py{version[0]}{version[1]}-{key}"


#: Every route's specs, preferred first. A newer Python gets a new spec here once it is measured
#: (onnx2tf 2.x needs Python >= 3.12 and pins ai-edge-litert 2.1.2; TensorFlow 2.19, which
#: onnx2tf 1.29 pins, has wheels up to Python 3.12).
ROUTES: dict[str, tuple[EnvSpec, ...]] = {
    "onnx": (
        EnvSpec(
            route="onnx",
            packages=("onnx2tf==1.29.24",),  # pins onnx, onnxruntime, tensorflow, numpy itself
            modules=("onnx2tf", "onnxruntime"),
            python_min=(3, 10),
            python_max=(3, 12),
            note="onnx2tf 1.29.24 (TensorFlow 2.19, ONNX Runtime 1.23)",
        ),
    ),
    "torch": (
        EnvSpec(
            route="torch",
            # An unpinned torch pulls a CUDA build of several GB; 2.13.0 resolves to the CPU
            # wheel where pip's index offers it. ONNX's second route (onnx2torch, then
            # litert-torch) and the quantizer (ai-edge-quantizer, which litert-torch pulls) run
            # here too. onnx2torch goes in without its dependencies: it requires torchvision,
            # whose only wheels for torch 2.13 are CUDA builds that do not import beside the CPU
            # torch; it uses torchvision only for NonMaxSuppression and RoiAlign, which
            # this route refuses by name (see _onnx_torch.py).
            packages=(
                "torch==2.13.0",
                "litert-torch==0.10.0",
                "onnx==1.19.1",
                "onnxruntime==1.23.0",
                "onnxsim==0.8.1",
            ),
            modules=("torch", "litert_torch"),
            python_min=(3, 10),
            python_max=(3, 13),
            note="torch 2.13.0, litert-torch 0.10.0, onnx2torch 1.5.15 (no TensorFlow)",
            no_deps=("onnx2torch==1.5.15",),
        ),
    ),
}

#: pip output that means the package index could not be reached (not a missing version).
_UNREACHABLE = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name "
    r"resolution|Name or service not known|Network is unreachable|Connection refused|"
    r"ConnectTimeoutError|ReadTimeoutError|ProxyError|SSLError|Could not fetch URL|"
    r"No route to host"
)


class IndexUnreachableError(MissingExtraError):
    """pip could not reach the package index while building a converter environment."""


@dataclass
class ConverterEnv:
    """A ready environment: its interpreter and what its marker records."""

    route: str
    path: Path
    record: dict[str, Any]

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def provenance(self) -> dict[str, Any]:
        """What goes into a model's provenance: the env, its pins and its Python."""
        return {
            "route": self.route,
            "name": self.path.name,
            "packages": self.record.get("packages", []),
            "python": self.record.get("python"),
        }


def converters_dir() -> Path:
    """``$TFLKIT_CONVERTERS_DIR``, else ``$XDG_CACHE_HOME/tflkit/converters`` (by default
    ``~/.cache/tflkit/converters``). The override leaves pip's own cache where it is."""
    configured = os.environ.get(DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "tflkit" / "converters"


def _version_of(python: str) -> tuple[int, int] | None:
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    major, _, minor = done.stdout.strip().partition(".")
    return (int(major), int(minor)) if done.returncode == 0 and minor.isdigit() else None


def _candidates() -> Iterator[str]:
    """This Python's base interpreter, then ``python3.N`` found on PATH, newest first."""
    yield getattr(sys, "_base_executable", None) or sys.executable
    for minor in range(14, 9, -1):
        found = shutil.which(f"python3.{minor}")
        if found:
            yield found


def select_spec(route: str, base_python: str | None = None) -> tuple[EnvSpec, str, tuple[int, int]]:
    """(spec, base interpreter, its version) for ``route``; one clear line when none fits."""
    if route not in ROUTES:
        raise MissingExtraError(f"unknown converter {route!r}; known: {', '.join(ROUTES)}")
    specs = ROUTES[route]
    for python in [base_python] if base_python else _candidates():
        version = _version_of(python)
        if version is None:
            continue
        for spec in specs:
            if spec.fits(version):
                return spec, python, version
    wanted = " or ".join(f"Python {s.pythons} ({s.note})" for s in specs)
    where = base_python or "this Python or on PATH"
    raise MissingExtraError(
        f"the {route} converter needs {wanted}; none found ({where}): install one, or bring "
        "your own environment with --python"
    )


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return record if (path / "bin" / "python").exists() else None


def find_env(route: str, root: Path | None = None) -> ConverterEnv | None:
    """The ready environment the current pins want for ``route``, or None."""
    spec, _, version = select_spec(route)
    path = (root or converters_dir()) / spec.dirname(version)
    record = _read_record(path)
    if record is None or record.get("packages") != list(spec.packages):
        return None
    return ConverterEnv(route, path, record)


def installed_envs(root: Path | None = None) -> list[ConverterEnv]:
    """Every ready environment in ``root`` (current or not), sorted by name."""
    base = root or converters_dir()
    found = []
    for path in sorted(base.glob("*-py*-*")) if base.is_dir() else []:
        record = _read_record(path)
        if record is not None:
            found.append(ConverterEnv(str(record.get("route")), path, record))
    return found


def _run_logged(cmd: list[str], log: Path, progress: Progress) -> tuple[int, list[str]]:
    """Run ``cmd``; each output line goes to ``log`` and to ``progress``; returns (code, lines).

    The command runs in a session of its own, killed whole when this process is interrupted
    (Ctrl-C, or the CLI's SIGTERM/SIGHUP exit): no pip, nor its build children, outlives tflkit.
    """
    from tflkit.proc.worker import own_session

    lines: list[str] = []
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        with own_session(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                lines.append(line.rstrip())
                step = pip_step(line)  # pip's warnings and summaries stay in the log
                if step is not None:
                    progress(step)
            return proc.wait(), lines


def _dir_size(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_symlink())


def _freeze(python: Path) -> list[str]:
    done = subprocess.run(
        [str(python), "-m", "pip", "freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout.split() if done.returncode == 0 else []


def _fail(spec: EnvSpec, lines: list[str], log: Path) -> MissingExtraError:
    text = "\n".join(lines)
    wanted = " ".join(spec.packages)
    unreachable = _UNREACHABLE.search(text)
    if unreachable:
        return IndexUnreachableError(
            f"cannot reach the package index to install {wanted} for the {spec.label} "
            f"({unreachable.group(0)}): check the network or pip's index settings "
            f"(pip config list), or bring your own environment with --python (log: {log})"
        )
    errors = [ln for ln in lines if ln.startswith("ERROR")] or lines[-1:] or ["no output"]
    return MissingExtraError(
        f"installing {wanted} for the {spec.label} failed: {errors[0][:300]} (log: {log})"
    )


def ensure_env(
    route: str,
    *,
    root: Path | None = None,
    progress: Progress | None = None,
    base_python: str | None = None,
) -> ConverterEnv:
    """The route's environment, built now if missing (under a lock; reused afterwards)."""
    spec, base, version = select_spec(route, base_python)
    return ensure_spec_env(spec, base, version, root=root or converters_dir(), progress=progress)


def base_for(spec: EnvSpec) -> tuple[str, tuple[int, int]]:
    """The base interpreter (this one, else ``python3.N`` on PATH) for ``spec``, and its version."""
    for python in _candidates():
        version = _version_of(python)
        if version is not None and spec.fits(version):
            return python, version
    raise MissingExtraError(f"the {spec.label} needs Python {spec.pythons}; none found")


def ensure_spec_env(
    spec: EnvSpec,
    base: str,
    version: tuple[int, int],
    *,
    root: Path,
    progress: Progress | None = None,
) -> ConverterEnv:
    """The environment of ``spec`` under ``root``, built from ``base`` now if missing (under a
    lock; reused afterwards): converter routes and runtime environments alike."""
    path = root / spec.dirname(version)
    record = _read_record(path)
    if record is not None and record.get("packages") == list(spec.packages):
        return ConverterEnv(spec.route, path, record)
    root.mkdir(parents=True, exist_ok=True)
    if progress is None:
        title = f"building the {spec.label} environment (first use): {' '.join(spec.packages)}"
        with BuildProgress(title) as show:
            return _build(spec, base, version, path, show)
    return _build(spec, base, version, path, progress)


def _build(
    spec: EnvSpec, base: str, version: tuple[int, int], path: Path, say: Progress
) -> ConverterEnv:
    route, root = spec.route, path.parent
    log = root / f"{path.name}.log"
    waiting = f"waiting for another tflkit process to finish building {path.name}"
    with exclusive_lock(root / f".{path.name}.lock", waiting, say):
        record = _read_record(path)
        if record is not None and record.get("packages") == list(spec.packages):
            return ConverterEnv(route, path, record)
        shutil.rmtree(path, ignore_errors=True)  # a build that was interrupted
        log.write_text("")
        try:
            record = _install(spec, base, version, path, log, say)
        except BaseException:  # failed, or interrupted (Ctrl-C, SIGTERM): nothing half-built
            shutil.rmtree(path, ignore_errors=True)
            raise
    return ConverterEnv(route, path, record)


def _install(
    spec: EnvSpec, base: str, version: tuple[int, int], path: Path, log: Path, say: Progress
) -> dict[str, Any]:
    """Create the venv at ``path``, install the pins, write the ready marker; its record."""
    start = time.perf_counter()
    say(f"creating the {spec.label} environment in {path}")
    code, lines = _run_logged([base, "-m", "venv", str(path)], log, say)
    if code != 0:
        raise _fail(spec, lines, log)
    python = path / "bin" / "python"
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    code, lines = _run_logged([*pip, *spec.packages], log, say)
    if code == 0 and spec.no_deps:
        code, lines = _run_logged([*pip, "--no-deps", *spec.no_deps], log, say)
    if code != 0:
        raise _fail(spec, lines, log)
    record = {
        "route": spec.route,
        "packages": list(spec.packages),
        "no_deps": list(spec.no_deps),
        "python": ".".join(map(str, version)),
        "base_python": base,
        "freeze": _freeze(python),
        "install_seconds": round(time.perf_counter() - start, 1),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    record["size_bytes"] = _dir_size(path)
    write_atomic(path / MARKER, json.dumps(record, indent=2) + "\n")
    return record
