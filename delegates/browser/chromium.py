"""Chromium for the browser harness: Debian's Chromium driven by Playwright, headless.

Playwright for Python (its Node driver ships in the wheel) launches the system's Chromium with
``executable_path``: no browser is downloaded, ``playwright install`` is never run. The flags give
one of two WebGPU adapters on a machine without a GPU (measured: ``/work/shared/DESIGN.md``):

- ``swiftshader``: ``--enable-unsafe-webgpu``; Chromium's own SwiftShader (Vulkan on the CPU),
  core WebGPU, a fallback adapter without ``shader-f16``;
- ``lavapipe``: ANGLE over Mesa's lavapipe (software Vulkan) through Dawn's OpenGL ES backend,
  which exists only in WebGPU compatibility mode: the page requests the adapter with
  ``featureLevel: 'compatibility'`` (Chromium blocklists llvmpipe for core WebGPU).

Every process of the browser is ours to end: Chromium is started in a process group of its own
(Playwright's launcher), tagged with a marker switch and given throw-away config and cache
folders (so even its crashpad handlers, which live in sessions of their own, name them).
:meth:`Chromium.close` closes it, kills the group, and sweeps anything still carrying the tag; it
runs on every exit path (``with``), including timeouts, errors and Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tflkit.errors import require_extra

from .errors import BrowserHarnessError

__all__ = [
    "ADAPTERS",
    "BROWSER_CHOICE",
    "CHROMIUM",
    "Adapter",
    "Chromium",
    "chromium_version",
    "kill_tagged",
    "processes_tagged",
]

CHROMIUM = "/usr/bin/chromium"
MARKER_SWITCH = "--tflkit-browser-harness"
LAUNCH_TIMEOUT_S = 60.0

#: No background traffic, no first-run UI; the sandbox cannot start as root.
COMMON_FLAGS = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--metrics-recording-only",
)


@dataclass(frozen=True)
class Adapter:
    """A WebGPU adapter Chromium can give headless: its flags and the page's feature level."""

    name: str
    flags: tuple[str, ...]
    #: "core" or "compatibility" (what the page asks requestAdapter for); "any": a core adapter,
    #: else a compatibility-mode one when the core one is missing or a software fallback
    feature_level: str
    note: str


ADAPTERS: dict[str, Adapter] = {
    "swiftshader": Adapter(
        "swiftshader",
        ("--enable-unsafe-webgpu",),
        "core",
        "Chromium's SwiftShader: core WebGPU on the CPU, a fallback adapter, no shader-f16",
    ),
    "lavapipe": Adapter(
        "lavapipe",
        (
            "--enable-unsafe-webgpu",
            "--ignore-gpu-blocklist",
            "--use-webgpu-adapter=opengles",
            "--use-angle=vulkan",
            "--enable-features=Vulkan",
            "--enable-webgpu-developer-features",
        ),
        "compatibility",
        "Mesa lavapipe through ANGLE (OpenGL ES over Vulkan): WebGPU compatibility mode",
    ),
}


#: A browser tflkit does not launch (a WebDriver session's): no flags, the browser's own adapter.
BROWSER_CHOICE = Adapter(
    "browser",
    (),
    "any",
    "the browser's own adapter: core WebGPU, else compatibility mode when that is a real GPU",
)


def _proc_cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _pgid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[2])
    except (OSError, ValueError, IndexError):
        return None


def processes_tagged(tag: str) -> list[int]:
    """Live processes whose command line contains ``tag`` (zombies, which have none, excluded)."""
    needle = tag.encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and needle in _proc_cmdline(entry):
            found.append(int(entry))
    return found


def kill_tagged(tags: list[str], timeout: float = 10.0) -> None:
    """SIGKILL every live process whose command line has one of ``tags``, until none is left
    (or ``timeout`` seconds passed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for tag in tags for p in processes_tagged(tag)]
        if not alive:
            return
        for pid in alive:
            _kill(pid, group=False)
        time.sleep(0.05)


def _kill(pid: int, *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


def _group_is_chromium(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a Chromium process in it (so it is still ours:
    a group id is not reused while any process is in the group)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _pgid(int(entry)) == pgid:
            program = _proc_cmdline(entry).split(b"\0", 1)[0]
            if b"chrom" in program.rsplit(b"/", 1)[-1]:
                return True
    return False


def chromium_version(executable: str = CHROMIUM) -> str | None:
    """``Chromium 156.0.8078.79 ...`` from ``--version``, or None."""
    import subprocess

    try:
        done = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


class Chromium:
    """One headless Chromium for one session of a job; use it as a context manager.

    ``on_console(kind, text)`` receives every console message and page error of every page;
    ``crashed`` turns true when a page's renderer dies.
    """

    def __init__(
        self,
        adapter: str,
        *,
        executable: str = CHROMIUM,
        on_console: Callable[[str, str], None] | None = None,
        extra_flags: tuple[str, ...] = (),
    ) -> None:
        if adapter not in ADAPTERS:
            raise BrowserHarnessError(
                f"unknown WebGPU adapter {adapter!r}; known: {', '.join(ADAPTERS)}"
            )
        self.adapter = ADAPTERS[adapter]
        self.executable = executable
        self.on_console = on_console or (lambda kind, text: None)
        self.extra_flags = extra_flags
        self.tag = f"{MARKER_SWITCH}={secrets.token_hex(8)}"
        self.crashed = False
        self.version: str | None = None
        self.pids: set[int] = set()
        self._home: Path | None = None
        self._playwright: Any = None
        self._browser: Any = None
        self._page: Any = None

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> Chromium:
        try:
            self._launch()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(graceful=kind is None)

    def flags(self) -> list[str]:
        flags = [*COMMON_FLAGS, *self.adapter.flags, *self.extra_flags, self.tag]
        if os.geteuid() == 0:
            flags.append("--no-sandbox")  # Chromium's sandbox refuses to run as root
        return flags

    def _launch(self) -> None:
        # no browser download: tflkit drives the system's Chromium
        require_extra("browser", "the browser harness", module="playwright")
        if not (os.path.isfile(self.executable) and os.access(self.executable, os.X_OK)):
            raise BrowserHarnessError(
                f"Chromium not found at {self.executable}: install it (Debian: apt-get install "
                "chromium) or give the path of a Chromium or Chrome"
            )
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright

        self._home = Path(tempfile.mkdtemp(prefix="tflkit-chromium-"))
        env = dict(os.environ)
        env.update(
            # the crash database and caches land here, not in the user's ~/.config
            XDG_CONFIG_HOME=str(self._home / "config"),
            XDG_CACHE_HOME=str(self._home / "cache"),
        )
        env.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
        self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=self.executable,
                headless=True,
                args=self.flags(),
                env=env,
                timeout=LAUNCH_TIMEOUT_S * 1000,
            )
        except PlaywrightError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise BrowserHarnessError(f"Chromium did not start: {first}") from None
        self.version = self._browser.version
        self._remember_pids()

    def _remember_pids(self) -> None:
        for pid in processes_tagged(self.tag):
            self.pids.add(pid)

    def open(self, url: str) -> Any:
        """A new page at ``url`` (not waiting for it to finish loading: the page reports)."""
        page = self._browser.new_page()
        page.on("console", lambda message: self.on_console(message.type, message.text))
        page.on("pageerror", lambda error: self.on_console("pageerror", str(error)))
        page.on("crash", lambda _page: self._crash())
        page.goto(url, wait_until="commit", timeout=LAUNCH_TIMEOUT_S * 1000)
        self._page = page
        self._remember_pids()
        return page

    def _crash(self) -> None:
        self.crashed = True
        self.on_console("crash", "the page's renderer process crashed")

    def wait(self, seconds: float) -> None:
        """Let Playwright deliver events (console, crash) for ``seconds``."""
        if self._page is not None and not self.crashed:
            try:
                self._page.wait_for_timeout(seconds * 1000)
                return
            except Exception:  # the page or browser went away: events are over
                pass
        time.sleep(seconds)

    def close(self, *, graceful: bool = False) -> None:
        """End the browser and every process it started; safe to call twice."""
        browser, playwright = self._browser, self._playwright
        self._browser = self._playwright = self._page = None
        if browser is not None and graceful:
            with contextlib.suppress(Exception):
                browser.close()
        self._kill_tagged()
        if playwright is not None:
            with contextlib.suppress(Exception):
                playwright.stop()
        self._kill_tagged()
        self._wait_gone()
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def _tags(self) -> list[str]:
        return [self.tag] + ([str(self._home)] if self._home is not None else [])

    def _kill_tagged(self) -> None:
        for tag in self._tags():
            for pid in processes_tagged(tag):
                self.pids.add(pid)
                # Chromium's main process leads its own group (Playwright starts it detached):
                # killing the group takes the zygotes, GPU process and renderers with it.
                _kill(pid, group=_pgid(pid) == pid)
                _kill(pid, group=False)
        for pid in list(self.pids):  # a main process that died first leaves its group behind
            if _group_is_chromium(pid):
                _kill(pid, group=True)

    def _wait_gone(self, timeout: float = 10.0) -> None:
        kill_tagged(self._tags(), timeout)
