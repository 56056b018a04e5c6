"""``tflkit device setup DEVICE``: give a Linux board a Python with ai-edge-litert and numpy.

The board needs no network. Over the device's own transport (ssh or adb) tflkit asks the board's
``python3`` (or ``--device-python``) for its version, platform, glibc level and word size; on the
host, ``pip download`` fetches the wheels for exactly that platform (``--platform manylinux_2_N_ARCH
--python-version X.Y --implementation cp --abi cpXY --only-binary=:all:``: ai-edge-litert at the
version tflkit pins, numpy and their dependencies) into a cache, ``$TFLKIT_DEVICE_WHEELS_DIR`` or
``$XDG_CACHE_HOME/tflkit/device-wheels/<key>`` (``~/.cache``), keyed by the platform and the
versions and reused afterwards. The wheels are pushed to the board, ``python3 -m venv DIR/venv``
and ``DIR/venv/bin/pip install --no-index --find-links`` build the environment there (``DIR`` is
``--workdir``, default ``~/.local/share/tflkit`` on the board), and ``import ai_edge_litert,
numpy`` checks it. A venv that already imports the pinned version is reused as it is.

The board's venv Python is recorded in ``devices.toml`` (:mod:`tflkit.harness.config_write`): the
entries naming this device (``device = "<spec>"``, or the name given to ``setup``) get their
``python`` line set or replaced; otherwise an entry named after the spec is appended. The file is
edited as text (comments and other entries stay as they are), the edit is checked by parsing it
back, and it is written atomically; an edit that does not read back as intended is not written
(the error says the line to add by hand). ``--device SPEC`` then finds the entry by its
``device`` value, so later jobs use that Python with no ``--device-python``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from tflkit import fsio
from tflkit.errors import TflkitError, UsageError
from tflkit.fsio import exclusive_lock
from tflkit.harness.adb import AdbDevice
from tflkit.harness.transport import (
    COMMAND_TIMEOUT,
    Completed,
    Device,
    ShellDevice,
    run_command,
)
from tflkit.report.progress import Progress, quiet

__all__ = ["SetupError", "SetupResult", "Target", "setup_device", "target_of"]

WHEELS_ENV = "TFLKIT_DEVICE_WHEELS_DIR"
MARKER = "tflkit-wheels.json"
DEFAULT_WORKDIR = "~/.local/share/tflkit"
DOWNLOAD_TIMEOUT = 1800.0
INSTALL_TIMEOUT = 1200.0
_PROBE_TAG = "tflkit-probe:"
_VERIFY_TAG = "tflkit-verify:"
_PROBE = (
    "import json, os, platform, sys, sysconfig\n"
    "from importlib.util import find_spec\n"
    "def has(name):\n"
    "    try:\n"
    "        return find_spec(name) is not None\n"
    "    except Exception:\n"
    "        return False\n"
    f"print({_PROBE_TAG!r} + json.dumps({{"
    "'version': list(sys.version_info[:3]), 'implementation': sys.implementation.name, "
    "'platform': sysconfig.get_platform(), 'machine': platform.machine(), "
    "'libc': list(platform.libc_ver()), 'bits': 64 if sys.maxsize > 2**32 else 32, "
    "'executable': sys.executable, 'home': os.path.expanduser('~'), "
    "'venv': has('venv'), 'ensurepip': has('ensurepip')}))"
)
_VERIFY = (
    "import json, importlib.metadata as m, ai_edge_litert, numpy\n"
    f"print({_VERIFY_TAG!r} + json.dumps({{'ai-edge-litert': m.version('ai-edge-litert'), "
    "'numpy': numpy.__version__}))"
)
#: ``manylinux`` legacy aliases: (tag, the glibc minor it stands for, the architectures it covers)
_LEGACY = (
    ("manylinux2014", 17, ("x86_64", "i686", "aarch64", "armv7l", "ppc64le", "s390x")),
    ("manylinux2010", 12, ("x86_64", "i686")),
    ("manylinux1", 5, ("x86_64", "i686")),
)


class SetupError(TflkitError):
    """The board cannot be given an environment (no wheel for it, no venv module, pip failed)."""

    exit_code = 1


@dataclass(frozen=True)
class Target:
    """What the board runs: CPython X.Y on ``arch`` with glibc ``glibc``."""

    python: tuple[int, int]
    arch: str
    glibc: tuple[int, int]
    probe: dict[str, Any]

    @property
    def label(self) -> str:
        return (
            f"linux {self.arch} (glibc {self.glibc[0]}.{self.glibc[1]}, "
            f"CPython {self.python[0]}.{self.python[1]})"
        )

    @property
    def cp(self) -> str:
        return f"cp{self.python[0]}{self.python[1]}"

    def platforms(self) -> list[str]:
        """pip ``--platform`` tags the board accepts, most specific first."""
        major, minor = self.glibc
        if major != 2:
            return []
        low = 5 if self.arch in ("x86_64", "i686") else 17
        tags = [f"manylinux_2_{m}_{self.arch}" for m in range(minor, low - 1, -1)]
        for tag, needs, arches in _LEGACY:
            if minor >= needs and self.arch in arches:
                tags.append(f"{tag}_{self.arch}")
        return tags

    def key(self, requirements: list[str]) -> str:
        digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:10]
        return f"{self.cp}-manylinux_{self.glibc[0]}_{self.glibc[1]}_{self.arch}-{digest}"


@dataclass
class SetupResult:
    device: str
    python: str
    venv: str
    target: Target
    versions: dict[str, str]
    wheels: dict[str, Any]
    config: dict[str, Any]
    reused_venv: bool
    seconds: float

    def document(self) -> dict[str, Any]:
        return {
            "schema": "tflkit.device-setup/1",
            "device": self.device,
            "python": self.python,
            "venv": self.venv,
            "platform": {
                "label": self.target.label,
                "arch": self.target.arch,
                "glibc": ".".join(map(str, self.target.glibc)),
                "python": ".".join(map(str, self.target.python)),
                "sysconfig": self.target.probe.get("platform"),
                "base_python": self.target.probe.get("executable"),
                "tags": self.target.platforms(),
            },
            "versions": self.versions,
            "wheels": self.wheels,
            "reused_venv": self.reused_venv,
            "config": self.config,
            "seconds": round(self.seconds, 2),
        }


# the pins ------------------------------------------------------------------------------------
def requirements() -> list[str]:
    """``ai-edge-litert==V`` (tflkit's pin) and tflkit's numpy requirement."""
    litert, numpy = None, None
    with contextlib.suppress(metadata.PackageNotFoundError):
        for req in metadata.requires("tflkit") or []:
            spec = req.split(";")[0].replace(" ", "")
            name = re.split(r"[<>=!~\[]", spec, maxsplit=1)[0].lower().replace("_", "-")
            if name == "ai-edge-litert" and litert is None:
                litert = spec
            elif name == "numpy" and numpy is None:
                numpy = spec
    if litert is None or "==" not in litert:
        litert = f"ai-edge-litert=={metadata.version('ai-edge-litert')}"
    return [litert, numpy or "numpy"]


def litert_version(reqs: list[str]) -> str:
    return reqs[0].split("==", 1)[1]


# asking the board ----------------------------------------------------------------------------
def _tagged(done: Completed, tag: str) -> dict[str, Any] | None:
    for line in done.stdout.splitlines():
        if line.startswith(tag):
            with contextlib.suppress(ValueError):
                return json.loads(line[len(tag) :])
    return None


def _why(done: Completed) -> str:
    for text in (done.stderr, done.stdout):
        lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
        if lines:
            return lines[-1]
    return f"exit status {done.returncode}"


def _shell(
    device: ShellDevice, command: str, what: str, timeout: float = COMMAND_TIMEOUT
) -> Completed:
    done = device.shell(command, timeout=timeout)
    if done.timed_out:
        raise SetupError(f"{device.spec}: {what} did not finish within {timeout:g} s (stopped)")
    return done


def probe(device: ShellDevice, python: str) -> Target:
    """Run the board's Python: its version, platform, glibc level and word size."""
    q = shlex.quote
    done = _shell(device, f"{q(python)} -c {q(_PROBE)}", f"running {python}")
    info = _tagged(done, _PROBE_TAG)
    if info is None:
        if done.returncode == 127 or "not found" in done.stderr:
            raise SetupError(
                f"{device.spec}: {python} not found on the device: install Python 3 there "
                "(Debian: apt install python3 python3-venv) or give --device-python"
            )
        raise SetupError(f"{device.spec}: {python} did not answer: {_why(done)}")
    return target_of(device.spec, info)


def target_of(spec: str, info: dict[str, Any]) -> Target:
    """The board's platform from the probe; a clear error for what no wheel can serve."""
    plat = str(info.get("platform") or "")
    machine = str(info.get("machine") or "")
    arch = plat.split("-", 1)[1] if plat.startswith("linux-") else machine
    arch = {"arm64": "aarch64", "amd64": "x86_64", "armv8l": "armv7l"}.get(arch, arch)
    if info.get("bits") == 32:  # a 32-bit userland on a 64-bit kernel
        arch = {"aarch64": "armv7l", "x86_64": "i686"}.get(arch, arch)
    version = tuple(info.get("version") or (0, 0))[:2]
    if not plat.startswith("linux"):
        raise SetupError(
            f"{spec}: the device's Python reports platform {plat or machine!r}, not Linux"
        )
    if info.get("implementation") != "cpython":
        raise SetupError(
            f"{spec}: the device's Python is {info.get('implementation')}; LiteRT wheels need "
            "CPython (give --device-python)"
        )
    libc, libc_version = [*(info.get("libc") or []), "", ""][:2]
    numbers = re.match(r"(\d+)\.(\d+)", str(libc_version))
    if libc != "glibc" or numbers is None:
        raise SetupError(
            f"{spec}: linux {arch} without glibc ({libc or 'musl?'}): LiteRT publishes manylinux "
            "(glibc) wheels only, none for this platform"
        )
    glibc = (int(numbers[1]), int(numbers[2]))
    return Target((int(version[0]), int(version[1])), arch, glibc, info)


def _need_venv(spec: str, python: str, target: Target) -> None:
    info = target.probe
    if info.get("venv") and info.get("ensurepip"):
        return
    x, y = target.python
    missing = "venv" if not info.get("venv") else "ensurepip"
    raise SetupError(
        f"{spec}: {python} has no {missing} module, so it cannot build a venv: install it on the "
        f"device (Debian, Ubuntu, Raspberry Pi OS: apt install python3-venv, or python{x}.{y}-venv)"
    )


# the wheels on the host ----------------------------------------------------------------------
def wheels_root() -> Path:
    """``$TFLKIT_DEVICE_WHEELS_DIR``, else ``$XDG_CACHE_HOME/tflkit/device-wheels``."""
    configured = os.environ.get(WHEELS_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "tflkit" / "device-wheels"


def _cached(folder: Path, reqs: list[str]) -> dict[str, Any] | None:
    try:
        record = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    files = record.get("files") or []
    if record.get("requirements") != reqs or not files:
        return None
    if not all((folder / "wheels" / name).is_file() for name in files):
        return None
    return record


def _pip_error(done: Completed, target: Target) -> str:
    text = done.stderr + "\n" + done.stdout
    if "No module named pip" in text:
        return f"{sys.executable} has no pip, which downloads the device's wheels"
    missing = re.search(r"No matching distribution found for (\S+)", text)
    unreachable = re.search(
        r"(NewConnectionError|Failed to establish a new connection|Temporary failure in name "
        r"resolution|ProxyError|Max retries exceeded|Network is unreachable)",
        text,
    )
    if missing and os.environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on"):
        return f"no {missing[1]} wheel for {target.label} in pip's find-links (PIP_NO_INDEX is set)"
    if missing and not unreachable:
        return (
            f"no {missing[1]} wheel for {target.label}: none is published for this platform "
            "(pip found no matching distribution)"
        )
    if unreachable:
        return (
            f"pip could not reach the package index from this host for the {target.label} "
            f"wheels ({unreachable[1]})"
        )
    return f"pip download of the {target.label} wheels failed: {_why(done)}"


def ensure_wheels(target: Target, reqs: list[str], spec: str, say: Progress) -> tuple[Path, dict]:
    """The folder of wheels for ``target`` (downloaded once with pip, then reused)."""
    platforms = target.platforms()
    if not platforms:
        raise SetupError(f"{spec}: no manylinux wheel can run on {target.label} (glibc too old)")
    root = wheels_root()
    folder = root / target.key(reqs)
    record = _cached(folder, reqs)
    if record is not None:
        say(f"using the cached wheels for {target.label} ({folder})")
        return folder, {**record, "cached": True}
    waiting = "waiting for another tflkit process downloading the same wheels"
    with exclusive_lock(root / f".{folder.name}.lock", waiting, say):
        record = _cached(folder, reqs)
        if record is not None:
            return folder, {**record, "cached": True}
        say(f"downloading the wheels for {target.label} with pip (about 50 MB, once)")
        stage = Path(tempfile.mkdtemp(dir=root, prefix=f".{folder.name}-partial-"))
        try:
            cmd = [sys.executable, "-m", "pip", "download", "--dest", str(stage / "wheels")]
            cmd += ["--only-binary=:all:", "--progress-bar", "off", "--disable-pip-version-check"]
            cmd += ["--python-version", f"{target.python[0]}.{target.python[1]}"]
            cmd += ["--implementation", "cp", "--abi", target.cp]
            for tag in platforms:
                cmd += ["--platform", tag]
            cmd += reqs
            start = time.monotonic()
            done = run_command(cmd, timeout=DOWNLOAD_TIMEOUT)
            if done.timed_out:
                raise SetupError(f"pip download did not finish within {DOWNLOAD_TIMEOUT:g} s")
            if done.returncode != 0:
                raise SetupError(f"{spec}: {_pip_error(done, target)}")
            files = sorted(p.name for p in (stage / "wheels").glob("*.whl"))
            record = {
                "requirements": reqs,
                "platform": target.label,
                "platforms": platforms,
                "python": f"{target.python[0]}.{target.python[1]}",
                "files": files,
                "bytes": sum((stage / "wheels" / f).stat().st_size for f in files),
            }
            fsio.write_atomic(stage / MARKER, json.dumps(record, indent=2) + "\n")
            if folder.exists():  # a stale or damaged cache entry
                shutil.rmtree(folder)
            stage.rename(folder)
            mb = record["bytes"] / 1e6
            say(f"downloaded {len(files)} wheels ({mb:.0f} MB) in {time.monotonic() - start:.1f} s")
            return folder, {**record, "cached": False}
        finally:
            shutil.rmtree(stage, ignore_errors=True)


def _pinned(files: list[str], name: str) -> str | None:
    for file in files:
        parts = file.split("-")
        if parts[0].lower().replace("_", "-") == name and len(parts) > 1:
            return f"{name}=={parts[1]}"
    return None


# the board -----------------------------------------------------------------------------------
def _remote_dir(workdir: str | None, target: Target) -> str:
    path = workdir or DEFAULT_WORKDIR
    home = str(target.probe.get("home") or "")
    if path == "~" or path.startswith("~/"):
        if not home.startswith("/"):
            raise UsageError(
                "--workdir: the device's home folder is unknown; give an absolute path"
            )
        path = home.rstrip("/") + path[1:]
    if not path.startswith("/"):
        raise UsageError(f"--workdir takes an absolute path on the device (or ~/...), got {path!r}")
    return path.rstrip("/") or "/"


def _verify(device: ShellDevice, python: str) -> tuple[Completed, dict[str, Any] | None]:
    q = shlex.quote
    done = _shell(device, f"{q(python)} -c {q(_VERIFY)}", "checking the venv")
    return done, _tagged(done, _VERIFY_TAG)


def _require_linux(device: Device) -> None:
    """UsageError unless ``device`` is a Linux device reached through a shell."""
    if not isinstance(device, ShellDevice):
        raise UsageError(
            f"device setup is for Linux devices (ssh:..., adb:...): {device.spec} runs with "
            "this tflkit's own Python"
        )
    if isinstance(device, AdbDevice) and device.kind == "android":
        raise UsageError(
            f"{device.spec} is an Android phone: it runs the tflkit app "
            "(android_harness/README.md), not a Python environment"
        )


def _build_venv(
    device: ShellDevice,
    base: str,
    target: Target,
    root: str,
    wheels: Path,
    files: list[str],
    megabytes: float,
    reqs: list[str],
    say: Progress,
) -> None:
    """Push ``wheels`` to a fresh folder under ``root``, make the venv there with ``base`` and
    install ai-edge-litert and numpy from the pushed wheels (no network); the folder goes after."""
    spec, q = device.spec, shlex.quote
    venv = f"{root}/venv"
    venv_python = f"{venv}/bin/python"
    exists = _shell(device, f"test -f {q(venv + '/pyvenv.cfg')} || test ! -e {q(venv)}", "checking")
    if exists.returncode != 0:
        raise SetupError(f"{spec}: {venv} exists and is not a venv; refusing to touch it")
    stage = f"{root}/.wheels-{uuid.uuid4().hex[:12]}"
    mkdir = _shell(device, f"mkdir -p {q(stage)}", "creating the work folder")
    if mkdir.returncode != 0:
        raise SetupError(f"{spec}: cannot create {root}: {_why(mkdir)}")
    try:
        say(f"{spec}: pushing {len(files)} wheels ({megabytes:.0f} MB)")
        device.push(wheels, stage)
        say(f"{spec}: building the venv ({base} -m venv {venv})")
        made = _shell(device, f"{q(base)} -m venv {q(venv)}", "python3 -m venv", INSTALL_TIMEOUT)
        if made.returncode != 0:
            why = _why(made)
            if "ensurepip" in made.stdout + made.stderr:
                x, y = target.python
                raise SetupError(
                    f"{spec}: {base} -m venv failed ({why}): install python3-venv on the device "
                    f"(Debian, Ubuntu, Raspberry Pi OS: apt install python3-venv, or "
                    f"python{x}.{y}-venv)"
                )
            raise SetupError(f"{spec}: {base} -m venv failed: {why}")
        pins = [_pinned(files, "ai-edge-litert") or reqs[0], _pinned(files, "numpy") or reqs[1]]
        say(f"{spec}: installing {' '.join(pins)} from the pushed wheels (no network)")
        install = (
            f"{q(venv_python)} -m pip --isolated install --disable-pip-version-check --no-input "
            f"--no-index --find-links {q(stage)} " + " ".join(q(p) for p in pins)
        )
        installed = _shell(device, install, "pip install", INSTALL_TIMEOUT)
        if installed.returncode != 0:
            raise SetupError(f"{spec}: pip install in the venv failed: {_why(installed)}")
    finally:
        with contextlib.suppress(TflkitError):
            device.shell(f"rm -rf {q(stage)}", timeout=COMMAND_TIMEOUT)


def setup_device(
    device: Device,
    *,
    python: str | None = None,
    workdir: str | None = None,
    progress: Progress | None = None,
) -> tuple[SetupResult, Target]:
    """Build (or reuse) the venv on ``device``; the caller records it (``config_write``)."""
    say = progress or quiet
    start = time.monotonic()
    _require_linux(device)
    base = python or "python3"
    spec = device.spec
    say(f"{spec}: asking {base} for its version and platform")
    target = probe(device, base)
    reqs = requirements()
    version = litert_version(reqs)
    root = _remote_dir(workdir, target)
    venv = f"{root}/venv"
    venv_python = f"{venv}/bin/python"
    say(f"{spec}: {target.label}; the venv goes to {venv}")
    done, versions = _verify(device, venv_python)
    if versions is not None and versions.get("ai-edge-litert") == version:
        say(f"{spec}: {venv} already has ai-edge-litert {version}")
        result = SetupResult(
            spec, venv_python, venv, target, versions, {"cached": None, "files": []}, {}, True, 0.0
        )
        result.seconds = time.monotonic() - start
        return result, target
    _need_venv(spec, base, target)
    folder, record = ensure_wheels(target, reqs, spec, say)
    files = list(record["files"])
    megabytes = record.get("bytes", 0) / 1e6
    _build_venv(device, base, target, root, folder / "wheels", files, megabytes, reqs, say)
    done, versions = _verify(device, venv_python)
    if versions is None:
        raise SetupError(f"{spec}: the new venv cannot import ai_edge_litert: {_why(done)}")
    say(f"{spec}: the venv imports ai-edge-litert {versions['ai-edge-litert']}")
    wheels = {"cache": str(folder), "cached": record["cached"], "files": files}
    result = SetupResult(spec, venv_python, venv, target, versions, wheels, {}, False, 0.0)
    result.seconds = time.monotonic() - start
    return result, target
