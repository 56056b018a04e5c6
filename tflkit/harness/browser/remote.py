"""The browser harness in a browser tflkit does not launch here: a device's browser over adb
(``--device adb:SERIAL --via browser``) or any browser that opens the printed URL (``--device
url``).

The host side is :func:`~tflkit.delegates.browser.job.run_browser_job` with an ``opener``: the job
is served on this machine (``tflkit.delegates.browser.server``: a token in every URL path, bound to
127.0.0.1 unless ``--host`` says otherwise), the page runs on the other side and posts its result
back, and the result folder is the protocol's (harness kind ``browser``), written into a hidden
sibling and renamed into place only when complete.

``adb:SERIAL --via browser``: ``adb reverse tcp:DEVICE tcp:HOST`` (adbd picks ``DEVICE``) makes
the device's ``http://127.0.0.1:DEVICE/TOKEN/`` reach the server (127.0.0.1 is a secure context, so
the page gets WebGPU). Then

- on an Android phone (``getprop`` answers) an intent opens the URL: ``am start -a
  android.intent.action.VIEW -d URL -p com.android.chrome`` (or the default browser when Chrome
  is not installed);
- on a Linux device behind adbd, the device's own Chromium starts headless through ``adb shell``
  with the flags ``tflkit.delegates.browser.chromium`` uses for the chosen WebGPU adapter, in a
  session of its own, with a throw-away profile folder and a marker switch; every process carrying
  the marker is killed at the end.

While the page runs, every :data:`CHECK_SECONDS` the host checks that the device's browser still
runs (Linux), that the reverse forward is still in place and points at the server, and that the
server still serves; each failure, like a page that never reports within the job's time, is one
:class:`~tflkit.harness.transport.DeviceError` line (exit code 4). The reverse forward is removed
on every exit path.

``url``: the job URL is printed (a progress line on stderr; and on stdout with a QR code in
Unicode half blocks when stdout is a terminal); whoever opens it runs the job. With the default
127.0.0.1 binding the URL works only on this machine, or through ``adb reverse`` / ``ssh -R``;
``--host 0.0.0.0`` (or an interface's address) serves it to the network, which the server says
in one warning line. A page opened over plain http on another address is not a secure context:
the browser gives it no WebGPU (the ``wasm`` backend still runs).

Chromium's own console lines (where Dawn reports some refused WebGPU work) reach the host only
when tflkit drives the browser; a page in a remote browser still reports WebGPU's uncaptured
errors and error scopes, which make a backend ``run_error`` as usual.
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from tflkit.delegates.browser.chromium import ADAPTERS, COMMON_FLAGS
from tflkit.delegates.device_protocol import DeviceResult
from tflkit.errors import UsageError
from tflkit.harness.adb import AdbDevice
from tflkit.harness.transport import COMMAND_TIMEOUT, Device, DeviceError
from tflkit.proc.worker import own_session
from tflkit.report.progress import Progress, quiet

from .device import StagedBrowserDevice

__all__ = [
    "CHECK_SECONDS",
    "REMOTE_MARKER",
    "VIA",
    "AdbBrowserDevice",
    "UrlDevice",
    "adb_device",
    "print_qr",
    "relabeled",
    "remote_device",
]

#: ``--via``: the device's browser, or the native harness (the tflkit app / the Linux harness).
VIA = ("browser", "app")
#: How often the host checks the device's browser, the reverse forward and the server.
CHECK_SECONDS = 2.0
#: The switch every Chromium started on a Linux device carries (``=TOKEN``), so all of its
#: processes (zygotes, GPU process, renderers, crashpad) can be found and killed.
REMOTE_MARKER = "--tflkit-remote-browser"
CHROME_PACKAGE = "com.android.chrome"
#: Chromium's own flags that Playwright adds for a page that must keep running unseen.
_BACKGROUND_FLAGS = (
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-renderer-backgrounding",
)
_PID = "tflkit-browser-pid:"
_EXIT = "tflkit-browser-exit:"


def _listening(port: int) -> bool:
    """Whether something accepts connections on this machine's ``127.0.0.1:port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def relabeled(who: str, **facts: Any) -> Callable[[Path], None]:
    """A ``finish`` step for :meth:`StagedBrowserDevice.run_staged`: ``who`` ran the page;
    ``facts`` go into the result's ``device`` (e.g. the browser's name and version as a WebDriver
    server reported them)."""
    return lambda result: _relabel(result, who, facts)


def _relabel(result: Path, browser: str, facts: dict[str, Any]) -> None:
    """Say in ``result.json`` that the browser picked the WebGPU adapter, not tflkit's flags."""
    import json

    from tflkit.fsio import write_atomic

    document = json.loads((result / "result.json").read_text())
    device = document.get("device") or {}
    device.update(facts)
    device["webgpu_adapter_mode"] = "browser"
    agent = device.get("user_agent") or "user agent unknown"
    if not device.get("browser"):  # nobody asked the browser its version: its user agent says
        import re

        named = re.findall(r"\b(Chrome|Firefox|Version)/([\d.]+)", agent)
        if named:
            kind, version = named[0]
            device["browser"] = f"{'Safari' if kind == 'Version' else kind} {version}"
    document["harness"]["runtime"] = (
        f"LiteRT.js {device.get('litertjs')} (@litertjs/core) in {browser} ({agent}), the "
        "WebGPU adapter the browser chose"
    )
    for record in document.get("backends") or []:
        if isinstance(record.get("gpu"), dict):
            record["gpu"]["adapter_mode"] = "browser"
    write_atomic(result / "result.json", json.dumps(document, indent=1) + "\n")


# -- adb:SERIAL --via browser ----------------------------------------------------------------------


class AdbBrowserDevice(StagedBrowserDevice):
    """``adb:SERIAL --via browser``: the job runs in the device's browser, served from here
    through ``adb reverse``."""

    def __init__(
        self,
        adb: AdbDevice,
        *,
        adapter: str = "swiftshader",
        cache_dir: Path | None = None,
    ) -> None:
        if adapter not in ADAPTERS:
            raise UsageError(f"unknown WebGPU adapter {adapter!r}; known: {', '.join(ADAPTERS)}")
        self.adb = adb
        self.spec = adb.spec
        self.adapter = adapter
        self.cache_dir = cache_dir

    def describe(self) -> str:
        if self.adb.kind == "android":
            return f"the browser of Android device {self.adb.serial} (LiteRT.js, adb reverse)"
        return f"headless Chromium on Linux device {self.adb.serial} (LiteRT.js, adb reverse)"

    def device_url(self, server_url: str, device_port: int) -> str:
        """The job URL as the device sees it: the reverse forward's port on its 127.0.0.1."""
        path = server_url.split("/", 3)[3]
        return f"http://127.0.0.1:{device_port}/{path}"

    def run_job(
        self, job: Path, dest: Path, *, timeout: float, progress: Progress | None = None
    ) -> DeviceResult:
        self.adb.connect()
        kind = self.adb.kind
        say = progress or quiet

        def opener(*, server: Any, adapter: str, on_console: Any) -> _AdbPage:
            return _AdbPage(self, server, adapter=adapter, android=kind == "android", say=say)

        return self.run_staged(
            job,
            dest,
            timeout=timeout,
            progress=progress,
            host="127.0.0.1",
            opener=opener,
            finish=relabeled("the phone's browser") if kind == "android" else None,
            hint=" (is the phone unlocked, with Chrome allowed to open links?)"
            if kind == "android"
            else "",
        )


class _AdbPage:
    """One session of the page in the device's browser (see the module docstring)."""

    def __init__(
        self,
        device: AdbBrowserDevice,
        server: Any,
        *,
        adapter: str,
        android: bool,
        say: Progress,
    ) -> None:
        self.device = device
        self.adb = device.adb
        self.spec = device.spec
        self.server = server
        self.adapter = adapter
        self.android = android
        self.say = say
        self.crashed = False  # a dead browser is a DeviceError here, not a crashed backend
        self.version: str | None = None
        self.device_port: int | None = None
        self.token = secrets.token_hex(8)
        self._shell: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self.chromium = ""
        self._stack = contextlib.ExitStack()
        self._lines: list[str] = []
        self._exited = threading.Event()
        self._next_check = 0.0

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> _AdbPage:
        try:
            self.device_port = self.adb.reverse(self.server.port)
            self._stack.callback(self.adb.remove_reverse, self.device_port)
            self.say(
                f"{self.spec}: adb reverse tcp:{self.device_port} tcp:{self.server.port} "
                "(the device reaches the job's server)"
            )
            self.version = self._browser_version()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()  # last in, first out: the browser, then the reverse forward

    # -- the browser -------------------------------------------------------------------------
    def _quick(self, command: str) -> str:
        done = self.adb.shell(command, timeout=COMMAND_TIMEOUT)
        return done.stdout.strip() if done.returncode == 0 and not done.timed_out else ""

    def _browser_version(self) -> str | None:
        if self.android:
            return None  # whichever browser takes the intent: its user agent names it
        self.chromium = self._quick(
            "command -v chromium || command -v chromium-browser || command -v google-chrome"
        )
        if not self.chromium:
            raise DeviceError(
                f"{self.spec}: no Chromium on the device (looked for chromium, chromium-browser, "
                "google-chrome on its PATH)"
            )
        out = self._quick(f"{shlex.quote(self.chromium)} --version")
        return out.removeprefix("Chromium ").split()[0] if out else None

    def open(self, url: str) -> None:
        assert self.device_port is not None
        target = self.device.device_url(url, self.device_port)
        if self.android:
            self._open_android(target)
        else:
            self._open_linux(target)

    def _open_android(self, url: str) -> None:
        has_chrome = "package:" in self._quick(f"pm path {CHROME_PACKAGE}")
        package = f" -p {CHROME_PACKAGE}" if has_chrome else ""
        command = f"am start -a android.intent.action.VIEW -d {shlex.quote(url)}{package}"
        done = self.adb.shell(command, timeout=COMMAND_TIMEOUT)
        if done.timed_out or done.returncode != 0 or "Error" in done.stdout:
            why = (done.stderr or done.stdout).strip().splitlines()
            raise DeviceError(
                f"{self.spec}: the device's browser did not open the job URL: "
                f"{why[-1] if why else 'am start failed'}"
            )
        self.say(f"{self.spec}: opened the job in {'Chrome' if has_chrome else 'the browser'}")

    def _flags(self, folder: str) -> list[str]:
        flags = [
            "--headless",
            *COMMON_FLAGS,
            *_BACKGROUND_FLAGS,
            *ADAPTERS[self.adapter].flags,
            f"--user-data-dir={folder}/profile",
            f"{REMOTE_MARKER}={self.token}",
        ]
        if self._quick("id -u") == "0":
            flags.append("--no-sandbox")  # Chromium's sandbox refuses to run as root
        return flags

    def _folder(self) -> str:
        return f"/tmp/tflkit-remote-browser-{self.token}"

    def _open_linux(self, url: str) -> None:
        q = shlex.quote
        folder = self._folder()
        command = " ".join(q(a) for a in [self.chromium, *self._flags(folder), url])
        script = (
            f'd={q(folder)}; rm -rf "$d"; mkdir -p "$d" || exit 97; cd "$d" || exit 97; '
            # adbd sets TMPDIR=/data/local/tmp (Android's) even on Linux: Chromium's singleton
            # socket folder then cannot be made; everything goes in the throw-away folder
            'mkdir -p "$d/tmp"; TMPDIR="$d/tmp" '
            'XDG_CONFIG_HOME="$d/config" XDG_CACHE_HOME="$d/cache" '
            'XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}" '
            f'setsid {command} >"$d/log" 2>&1 </dev/null & '
            f'echo {_PID}$!; wait $!; echo {_EXIT}$?; tail -n 3 "$d/log"'
        )
        # closed last in, first out: the local adb shell is killed, its reader ends, then every
        # process of the device's Chromium is killed (then __enter__'s reverse is removed)
        self._stack.callback(self._kill_remote)
        self._stack.callback(self._join_reader)
        self._shell = self._stack.enter_context(
            own_session(
                ["adb", "-s", self.adb.serial, "shell", script],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        )
        self._reader = threading.Thread(target=self._read, daemon=True, name="tflkit-adb-browser")
        self._reader.start()
        self.say(f"{self.spec}: started the device's Chromium (WebGPU adapter {self.adapter})")

    def _join_reader(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=5)

    def _read(self) -> None:
        assert self._shell is not None and self._shell.stdout is not None
        for raw in self._shell.stdout:
            self._lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
        self._exited.set()

    def _kill_remote(self) -> None:
        """Kill every process of the device's Chromium (its marker) and remove its folder.

        The token is spelt in two halves in the script, so the shell running it never carries
        the whole marker in its own command line and does not kill itself."""
        head, tail = self.token[:8], self.token[8:]
        script = (
            f't={head}; t="$t"{tail}; '
            "for n in 1 2 3; do "
            'for f in $(grep -lsF -- "$t" /proc/[0-9]*/cmdline); do '
            'p=${f#/proc/}; kill -9 "${p%/cmdline}" 2>/dev/null; done; sleep 0.2; done; '
            'rm -rf "/tmp/tflkit-remote-browser-$t"'
        )
        with contextlib.suppress(DeviceError):
            self.adb.shell(script, timeout=COMMAND_TIMEOUT)

    # -- while the page runs -----------------------------------------------------------------
    def wait(self, seconds: float) -> None:
        time.sleep(seconds)
        now = time.monotonic()
        if now < self._next_check:
            return
        self._next_check = now + CHECK_SECONDS
        self._check()

    def _check(self) -> None:
        if self._shell is not None and self._exited.is_set():
            lines = [ln.strip() for ln in self._lines if ln.strip() and not ln.startswith(_PID)]
            status = next((ln[len(_EXIT) :] for ln in lines if ln.startswith(_EXIT)), None)
            detail = f"exit status {status}" if status else "the adb shell ended"
            log = " | ".join(ln for ln in lines if not ln.startswith(_EXIT))[-300:]
            detail += f"; its last lines: {log}" if log else ""
            raise DeviceError(f"{self.spec}: the device's browser exited during the job ({detail})")
        if not _listening(self.server.port):
            raise DeviceError(f"{self.spec}: the job's server on port {self.server.port} stopped")
        forwards = dict(self.adb.reverses())
        want = f"tcp:{self.server.port}"
        if forwards.get(self.device_port or -1) != want:
            now = forwards.get(self.device_port or -1)
            raise DeviceError(
                f"{self.spec}: the port forward the page needs is gone (adb reverse "
                f"tcp:{self.device_port} now {'points at ' + now if now else 'absent'}, "
                f"not {want})"
            )


# -- --device url ----------------------------------------------------------------------------------


class UrlDevice(StagedBrowserDevice):
    """``--device url``: print the job URL (and a QR code) and wait for any browser to run it."""

    adapter = "swiftshader"  # the page asks for a core WebGPU adapter

    def __init__(
        self,
        host: str = "127.0.0.1",
        *,
        cache_dir: Path | None = None,
        out: TextIO | None = None,
    ) -> None:
        self.spec = "url"
        self.host = host
        self.cache_dir = cache_dir
        self.out = out

    def describe(self) -> str:
        return f"any browser that opens the job URL (served on {self.host})"

    def run_job(
        self, job: Path, dest: Path, *, timeout: float, progress: Progress | None = None
    ) -> DeviceResult:
        say = progress or quiet

        def opener(*, server: Any, adapter: str, on_console: Any) -> _UrlPage:
            return _UrlPage(self, server, say=say, timeout=timeout)

        return self.run_staged(
            job,
            dest,
            timeout=timeout,
            progress=progress,
            host=self.host,
            opener=opener,
            finish=relabeled("the browser that opened the job URL"),
        )


def _lan_address() -> str:
    """This machine's address on the network its default route leaves by (nothing is sent)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: a route lookup only
        return str(probe.getsockname()[0])
    return socket.gethostname()


class _UrlPage:
    """One session: print the URL, then wait for whoever opens it."""

    def __init__(self, device: UrlDevice, server: Any, *, say: Progress, timeout: float) -> None:
        self.device = device
        self.server = server
        self.say = say
        self.crashed = False
        self.version: str | None = None
        #: the page may be opened any time within the job's timeout
        self.hello_seconds = timeout
        self._next_check = 0.0

    def __enter__(self) -> _UrlPage:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def open(self, url: str) -> None:
        if self.device.host in ("0.0.0.0", "::", ""):
            host = _lan_address()
            url = f"http://{host}:{self.server.port}/{url.split('/', 3)[3]}"
        self.say(f"url: open {url} in a browser (the job waits for it)")
        out = self.device.out or sys.stdout
        if out.isatty():  # a terminal: the URL again, big enough to scan (stdout stays clean
            print(url, file=out, flush=True)  # for --json when it is a pipe)
            print_qr(url, out)
        if not url.startswith(("http://127.0.0.1:", "http://localhost:", "http://[::1]:")):
            self.say(
                "url: a browser on another machine gets no WebGPU over plain http (not a secure "
                "context): only wasm runs there unless it treats this origin as secure"
            )

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + CHECK_SECONDS
            if not _listening(self.server.port):
                raise DeviceError(f"url: the job's server on port {self.server.port} stopped")


def print_qr(text: str, out: TextIO) -> None:
    """``text`` as a QR code drawn with Unicode half blocks (two modules per character)."""
    try:
        import segno
    except ImportError:
        print("(pip install 'tflkit[browser]' to get a QR code here)", file=out)
        return
    code = segno.make(text, error="l", micro=False)
    rows = [[bool(v) for v in row] for row in code.matrix_iter(scale=1, border=4)]
    if len(rows) % 2:
        rows.append([False] * len(rows[0]))
    glyph = {(False, False): " ", (True, False): "\u2580", (False, True): "\u2584"}
    glyph[(True, True)] = "\u2588"
    for top, bottom in zip(rows[::2], rows[1::2], strict=True):
        # dark modules drawn as light characters would invert the code: draw the light ones
        print("".join(glyph[(not a, not b)] for a, b in zip(top, bottom, strict=True)), file=out)
    out.flush()


# -- from the command line -------------------------------------------------------------------------


def adb_device(
    serial: str,
    *,
    via: str | None = None,
    python: str | None = None,
    workdir: str | None = None,
    adapter: str = "swiftshader",
    progress: Progress | None = None,
) -> Device:
    """``adb:SERIAL`` with ``--via browser|app``, or the default: the native harness (the tflkit
    app on Android, the Linux harness elsewhere), except on an Android phone without the tflkit
    app, where the job runs in the phone's browser."""
    if via is not None and via not in VIA:
        raise UsageError(f"--via takes {' or '.join(VIA)}, got {via!r}")
    if python is None or workdir is None:  # its devices.toml entry, as parse_device reads it
        from tflkit.harness.config import settings_for

        entry = settings_for(f"adb:{serial}")
        python, workdir = python or entry.get("python"), workdir or entry.get("workdir")
    adb = AdbDevice(serial, python=python or "python3", workdir=workdir)
    if via == "app":
        return adb
    if via == "browser":
        return AdbBrowserDevice(adb, adapter=adapter)
    if adb.kind == "android" and not adb.app_installed():
        if progress is not None:
            progress(
                f"{adb.spec}: the tflkit app is not installed; the job runs in the phone's "
                "browser (LiteRT.js)"
            )
        return AdbBrowserDevice(adb, adapter=adapter)
    return adb


def remote_device(
    spec: str,
    *,
    via: str | None = None,
    host: str | None = None,
    python: str | None = None,
    progress: Progress | None = None,
) -> Device | None:
    """The device for ``url`` or ``adb:SERIAL`` (see :func:`adb_device`: without ``via`` this
    asks the device what it is); None for any other spec (the caller parses it as usual).
    ``host`` is for ``url`` only."""
    if spec == "url":
        return UrlDevice(host or "127.0.0.1")
    if host is not None:
        raise UsageError("--host is for --device url")
    scheme, sep, rest = spec.partition(":")
    if sep and scheme == "adb":
        return adb_device(rest, via=via, python=python, progress=progress)
    return None
