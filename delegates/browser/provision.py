"""LiteRT.js for the browser harness: fetched once with npm into the user's cache, then reused.

The page loads ``@litertjs/core`` (its ES module and the four Wasm builds) and
``@litertjs/wasm-utils`` from the harness's own local server, never from a CDN. They are fetched
with ``npm pack`` (so npm's registry settings, proxy and certificates apply and no install script
runs), checked against the sha512 pinned here, and unpacked into
``$XDG_CACHE_HOME/tflkit/browser/litertjs-<version>/`` (default ``~/.cache/tflkit/browser``;
``$TFLKIT_BROWSER_DIR`` overrides the ``browser`` folder; the tests put it in their own cache so CI
can keep it). A file lock keeps two processes from fetching at once; ``tflkit-litertjs.json`` is
written last and marks the folder ready.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tflkit.fsio import exclusive_lock, extract_tar, write_atomic

from .errors import ProvisionError

__all__ = [
    "LITERTJS_VERSION",
    "PACKAGES",
    "LiteRtJs",
    "browser_cache_dir",
    "ensure_litertjs",
    "find_litertjs",
]

LITERTJS_VERSION = "2.5.3"
#: npm package -> (folder in the cache, sha512 integrity of the registry's tarball).
PACKAGES: dict[str, tuple[str, str]] = {
    "@litertjs/core": (
        "core",
        "sha512-PlGmbMOq9WitX7FO0jhbdJw9GthatsyuCQXjTt/wJZo0FLaw48q4tz8IwqgqCIkviYGr9OFDL1kCnN4nzWoyJQ==",
    ),
    "@litertjs/wasm-utils": (
        "wasm-utils",
        "sha512-4fJiw6tBQnIs+0jH/OQ16nYOiSl8/+zZnn5h2ul8aTKHi05sVqZW580Tmk78pC2kT39A9OYBVdFawteZ/sI1kQ==",
    ),
}
#: Files the page needs; a folder without them is not ready.
REQUIRED = (
    "core/dist/index.js",
    "core/wasm/litert_wasm_jspi_internal.js",
    "core/wasm/litert_wasm_jspi_internal.wasm",
    "core/wasm/litert_wasm_threaded_internal.js",
    "core/wasm/litert_wasm_threaded_internal.wasm",
    "wasm-utils/dist/index.js",
)
MARKER = "tflkit-litertjs.json"
DIR_ENV = "TFLKIT_BROWSER_DIR"
NPM_TIMEOUT = 600.0


def browser_cache_dir() -> Path:
    """``$TFLKIT_BROWSER_DIR``, else ``$XDG_CACHE_HOME/tflkit/browser`` (``~/.cache/...``)."""
    configured = os.environ.get(DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "tflkit" / "browser"


@dataclass(frozen=True)
class LiteRtJs:
    """A ready LiteRT.js folder: ``core/`` and ``wasm-utils/`` (each an npm package's content)."""

    path: Path
    version: str
    record: dict[str, Any]

    @property
    def core(self) -> Path:
        return self.path / "core"


def _folder(root: Path, version: str) -> Path:
    return root / f"litertjs-{version}"


def _ready(path: Path, version: str) -> dict[str, Any] | None:
    try:
        record = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if record.get("version") != version or not all((path / f).is_file() for f in REQUIRED):
        return None
    return record


def find_litertjs(root: Path | None = None, version: str = LITERTJS_VERSION) -> LiteRtJs | None:
    """The ready LiteRT.js folder in the cache, or None (nothing is fetched)."""
    path = _folder(root or browser_cache_dir(), version)
    record = _ready(path, version)
    return None if record is None else LiteRtJs(path, version, record)


def _say(line: str) -> None:
    print(f"tflkit: {line}", file=sys.stderr, flush=True)


def ensure_litertjs(
    root: Path | None = None,
    *,
    version: str = LITERTJS_VERSION,
    npm: str = "npm",
    registry: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> LiteRtJs:
    """The LiteRT.js folder, fetched now with npm if the cache lacks it (one line of progress).

    ``registry`` overrides npm's own registry setting. Raises :class:`ProvisionError` (one line)
    when npm is missing, the registry cannot be reached or a download does not match its pin.
    """
    if version != LITERTJS_VERSION:
        raise ProvisionError(
            f"LiteRT.js {version} is not pinned here; this tflkit pins {LITERTJS_VERSION}"
        )
    root = root or browser_cache_dir()
    found = find_litertjs(root, version)
    if found is not None:
        return found
    say = progress or _say
    root.mkdir(parents=True, exist_ok=True)
    path = _folder(root, version)
    waiting = f"waiting for another tflkit process to finish fetching {path.name}"
    with exclusive_lock(root / f".{path.name}.lock", waiting, say):
        found = find_litertjs(root, version)
        if found is not None:
            return found
        shutil.rmtree(path, ignore_errors=True)  # an interrupted fetch
        names = " ".join(f"{name}@{version}" for name in PACKAGES)
        say(f"fetching LiteRT.js with npm (first use, about 12 MB): {names} -> {path}")
        start = time.perf_counter()
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".{path.name}-"))
        try:
            record = _fetch(tmp, version, npm, registry)
            record["fetch_seconds"] = round(time.perf_counter() - start, 1)
            write_atomic(tmp / MARKER, json.dumps(record, indent=1) + "\n")
            tmp.rename(path)
        except BaseException:  # failed or interrupted: nothing half-fetched stays
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        say(f"LiteRT.js {version} ready in {time.perf_counter() - start:.0f} s")
    found = find_litertjs(root, version)
    if found is None:  # pragma: no cover - the folder was just written
        raise ProvisionError(f"LiteRT.js fetched into {path} but the folder is incomplete")
    return found


def _npm_error(stdout: str, stderr: str) -> str:
    """npm's own one-line reason (its --json error summary, else its last 'npm error' line)."""
    try:
        summary = json.loads(stdout).get("error", {})
        if summary.get("summary"):
            return f"{summary.get('code', 'error')}: {summary['summary']}".strip()
    except (ValueError, AttributeError):
        pass
    lines = [ln for ln in stderr.splitlines() if ln.startswith(("npm error", "npm ERR!"))]
    for line in lines:
        if "FetchError" in line or "code" in line:
            return line.removeprefix("npm error").strip()
    return (lines[-1] if lines else (stderr.strip().splitlines() or ["no output"])[-1])[:300]


def _run_npm(cmd: list[str], cwd: Path) -> tuple[int | None, str, str]:
    """npm in a session of its own, killed whole on timeout or interrupt."""
    from tflkit.proc.worker import kill_group, own_session

    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false"}
    with own_session(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=NPM_TIMEOUT)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            out, err = proc.communicate()
            return None, out, err
    return proc.returncode, out, err


def _integrity(path: Path) -> str:
    digest = hashlib.sha512(path.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode()


def _fetch(dest: Path, version: str, npm: str, registry: str | None) -> dict[str, Any]:
    npm_path = shutil.which(npm)
    if npm_path is None:
        raise ProvisionError(
            f"npm is not installed ({npm!r} not found): the browser harness fetches LiteRT.js "
            "with it once (Debian: apt-get install nodejs npm)"
        )
    packs = dest / ".packs"
    packs.mkdir()
    cmd = [npm_path, "pack", "--json", "--pack-destination", str(packs)]
    cmd += ["--fetch-retries=1", "--fetch-retry-mintimeout=2000", "--fetch-retry-maxtimeout=9000"]
    cmd += [f"--registry={registry}"] if registry else []
    cmd += [f"{name}@{version}" for name in PACKAGES]
    code, out, err = _run_npm(cmd, packs)
    where = registry or "npm's configured registry"
    if code is None:
        raise ProvisionError(
            f"npm did not fetch LiteRT.js {version} from {where} within {NPM_TIMEOUT:.0f} s"
        )
    if code != 0:
        raise ProvisionError(
            f"npm could not fetch LiteRT.js {version} from {where}: {_npm_error(out, err)} "
            "(check the network, or npm's registry and proxy settings: npm config list)"
        )
    try:
        packed = {entry["name"]: entry for entry in json.loads(out)}
    except (ValueError, TypeError, KeyError):
        raise ProvisionError(f"npm pack printed no package list: {out[:200]!r}") from None
    record: dict[str, Any] = {"version": version, "packages": {}}
    for name, (folder, pinned) in PACKAGES.items():
        entry = packed.get(name)
        if entry is None or entry.get("version") != version:
            raise ProvisionError(f"npm pack did not give {name}@{version} (got {entry!r:.200})")
        tarball = packs / entry["filename"]
        actual = _integrity(tarball)
        if actual != pinned:
            raise ProvisionError(
                f"{name}@{version} from {where} does not match its pinned sha512 "
                f"({actual[:24]}... != {pinned[:24]}...): refusing to use it"
            )
        _unpack(tarball, dest / folder)
        record["packages"][name] = {
            "folder": folder,
            "integrity": actual,
            "size": entry.get("size"),
        }
    shutil.rmtree(packs)
    missing = [f for f in REQUIRED if not (dest / f).is_file()]
    if missing:
        raise ProvisionError(f"LiteRT.js {version} from npm lacks {', '.join(missing)}")
    return record


def _unpack(tarball: Path, dest: Path) -> None:
    """An npm tarball's ``package/`` folder into ``dest`` (no links, nothing outside it)."""
    dest.mkdir()
    with tarfile.open(tarball, "r:gz") as tar:
        members = []
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if (
                not parts
                or parts[0] != "package"
                or ".." in parts
                or not (member.isfile() or member.isdir())
            ):
                continue
            member.name = str(Path(*parts[1:])) if len(parts) > 1 else "."
            members.append(member)
        extract_tar(tar, dest, members)
