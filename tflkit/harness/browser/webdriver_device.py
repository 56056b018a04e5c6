"""``--device webdriver:URL``: the browser of a W3C WebDriver session (ChromeDriver, Appium, a
Selenium Grid, a cloud device farm) runs the browser harness's job.

The host side is :func:`~tflkit.delegates.browser.job.run_browser_job` with an ``opener`` that asks
the WebDriver server for one browser session per page session, so the protocol and the result
folder (harness kind ``browser``) are ``--device browser``'s. Two ways to the page:

- ``page`` (the default when the browser can reach this machine): the browser opens the job's page
  from the one-job server (``tflkit.delegates.browser.server``: a token in every URL path). When the
  WebDriver server is on loopback the page is on ``http://127.0.0.1`` (a secure context, so WebGPU);
  otherwise ``public_url`` (``--public-url``) is the URL the browser reaches the server by (a
  tunnel, or a LAN address with the server bound there by ``--host``); the token is always in the
  path.
- ``session`` (the default when the WebDriver server is elsewhere and no public URL is given, or
  when the session's ``platformName`` is android or ios: a phone's browser does not reach this
  machine's 127.0.0.1 even when Appium runs here; or ``--via session``): nothing needs to reach this
  machine. The browser opens ``file:///`` (a secure context on Chromium, so WebGPU; a
  ``devices.toml`` entry's ``start_page`` names another secure page),
  ``delegates/browser/page/session.js`` runs there, and every file the page would fetch (the job,
  LiteRT.js, the page's script) is pushed through the session with WebDriver's execute in base64
  chunks; what the page posts (events, outputs) waits in an outbox the host pulls the same way and
  hands to the job's server object, which stores it exactly as if it had been posted over HTTP (the
  server then serves nobody).

The session is ended (``DELETE /session/ID``) on every path: done, error, timeout, Ctrl-C. While
the page runs the host reads the browser's console (ChromeDriver's ``se/log``; Chromium's own
WebGPU warnings are there) and so checks that the server still answers; a server that stops
answering is one :class:`~tflkit.harness.transport.DeviceError` line (exit code 4). When the
WebDriver server is on loopback and the capabilities are ChromeDriver's, the browser carries a
marker switch, and every process with it is killed at the end, even when the server died first.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import io
import json
import re
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tflkit.delegates.browser.chromium import BROWSER_CHOICE, kill_tagged
from tflkit.delegates.browser.server import PAGE_DIR
from tflkit.delegates.device_protocol import DeviceResult
from tflkit.errors import UsageError
from tflkit.harness.transport import DeviceError
from tflkit.proc.interrupts import signal_received
from tflkit.report.progress import Progress, quiet

from .device import StagedBrowserDevice
from .remote import relabeled
from .webdriver import ServerGone, WebDriver, WebDriverError, is_loopback, without_secret

__all__ = [
    "MARKER_SWITCH",
    "MODES",
    "WebDriverDevice",
    "parse_webdriver_spec",
    "webdriver_devices",
]

#: ``--via`` for a WebDriver device: the page from this machine's server, or the session alone.
MODES = ("page", "session")
#: The switch a loopback ChromeDriver's browser carries (``=TOKEN``), so it can be swept.
MARKER_SWITCH = "--tflkit-webdriver"
#: The secure page the session transport starts from.
SESSION_START = "file:///"
#: Bytes per chunk pushed or pulled through the session (base64 makes it 4/3 larger).
CHUNK = 4 << 20
#: How often the page mode reads the console (and so checks the server answers).
CHECK_SECONDS = 1.0
#: ChromeDriver's console levels as the page's console names them.
_LEVELS = {"SEVERE": "error", "WARNING": "warning", "INFO": "info", "DEBUG": "debug"}
_QUOTED = re.compile(r'^\S+ (?:\d+:\d+ )?("(?:[^"\\]|\\.)*")$', re.S)


def parse_webdriver_spec(spec: str) -> str:
    """The server URL of ``webdriver:URL`` (``http://HOST:PORT[/BASE]``)."""
    _, _, url = spec.partition(":")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"--device webdriver:URL needs the WebDriver server's http(s) URL, got {spec!r}"
        )
    return url


class WebDriverDevice(StagedBrowserDevice):
    """The browser of a W3C WebDriver session running LiteRT.js (see the module docstring)."""

    adapter = BROWSER_CHOICE.name  # the browser's own adapter (core, else compatibility mode)

    def __init__(
        self,
        url: str,
        *,
        capabilities: Mapping[str, Any] | None = None,
        name: str | None = None,
        via: str | None = None,
        public_url: str | None = None,
        host: str | None = None,
        start_page: str | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        if via is not None and via not in MODES:
            raise UsageError(f"--via for a WebDriver device takes {' or '.join(MODES)}: {via!r}")
        if public_url is not None and urlsplit(public_url).scheme not in ("http", "https"):
            raise UsageError(f"--public-url must be an http(s) URL, got {public_url!r}")
        if via == "session" and public_url is not None:
            raise UsageError("--public-url is for the page mode, not --via session")
        self.url = url.rstrip("/")  # with its user:password@, if any (sent, never shown)
        self.shown = without_secret(self.url)
        self.spec = name or f"webdriver:{self.shown}"
        self.capabilities = dict(capabilities or {})
        self.public_url = public_url
        self.host, self.port = _host_port(host, public_url)
        self.cache_dir = cache_dir
        self.start_page = start_page or SESSION_START
        self.via = via
        reachable = is_loopback(self.url) or public_url is not None
        self.mode = via or ("page" if reachable else "session")

    def mode_for(self, capabilities: Mapping[str, Any]) -> str:
        """``page`` or ``session`` for a session the server matched: a phone's browser
        (``platformName`` android or ios) behind a WebDriver server on loopback does not reach
        this machine's 127.0.0.1, so it gets the session transport unless told otherwise."""
        platform = str(capabilities.get("platformName") or "").lower()
        if self.via is None and self.public_url is None and platform in ("android", "ios"):
            return "session"
        return self.mode

    def describe(self) -> str:
        how = "pushed through the session" if self.mode == "session" else "served from here"
        return f"the browser of a WebDriver session at {self.shown} (LiteRT.js, {how})"

    def run_job(
        self, job: Path, dest: Path, *, timeout: float, progress: Progress | None = None
    ) -> DeviceResult:
        say = progress or quiet
        facts: dict[str, Any] = {"webdriver": {"url": self.shown, "mode": self.mode}}

        def opener(*, server: Any, adapter: str, on_console: Any) -> _WebDriverPage:
            return _WebDriverPage(self, server, on_console=on_console, say=say, facts=facts)

        def finish(result: Path) -> None:
            relabeled("the browser of a WebDriver session", **facts)(result)

        return self.run_staged(
            job,
            dest,
            timeout=timeout,
            progress=progress,
            host=self.host,
            port=self.port,
            opener=opener,
            finish=finish,
        )

    def session_capabilities(self, token: str) -> dict[str, Any]:
        """The capabilities asked for: the user's, plus (ChromeDriver's on loopback) the marker
        switch and the console at every level; with an http public URL, Chromium is told to
        treat that origin as secure (WebGPU)."""
        caps = copy.deepcopy(self.capabilities)
        inner = caps.get("capabilities")
        always = inner.setdefault("alwaysMatch", {}) if isinstance(inner, dict) else caps
        chrome = always.get("goog:chromeOptions")
        if isinstance(chrome, dict):
            args = list(chrome.get("args") or [])
            if is_loopback(self.url):
                args.append(f"{MARKER_SWITCH}={token}")
            public = urlsplit(self.public_url or "")
            if public.scheme == "http" and not is_loopback(self.public_url or ""):
                args.append(
                    f"--unsafely-treat-insecure-origin-as-secure={public.scheme}://{public.netloc}"
                )
            chrome["args"] = args
            always.setdefault("goog:loggingPrefs", {"browser": "ALL"})
        return caps


class _WebDriverPage:
    """One session of the page in a WebDriver session's browser (the ``opener`` protocol of
    ``run_browser_job``): opened from this machine's job server, or pushed through the session
    (:class:`_SessionTransport`)."""

    def __init__(
        self,
        device: WebDriverDevice,
        server: Any,
        *,
        on_console: Callable[[str, str], None],
        say: Progress,
        facts: dict[str, Any],
    ) -> None:
        self.device = device
        self.server = server
        self.on_console = on_console
        self.say = say
        self.facts = facts
        self.crashed = False
        self.version: str | None = None
        self.token = secrets.token_hex(8)
        self.driver = WebDriver(device.url, device.session_capabilities(self.token))
        self.transport: _SessionTransport | None = None
        self._next_check = 0.0

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> _WebDriverPage:
        try:
            self._started(self.driver.start())
        except BaseException:
            self.__exit__()
            raise
        return self

    def _started(self, caps: Mapping[str, Any]) -> None:
        """Note what the server matched; pick the page's way (``mode_for``)."""
        self.version = caps.get("browserVersion")
        name = caps.get("browserName") or "browser"
        self.facts["browser"] = f"{name} {self.version}".strip() if self.version else None
        mode = self.device.mode_for(caps)
        if mode == "session":
            self.transport = _SessionTransport(self)
        self.facts["webdriver"].update(
            mode=mode,
            platform=caps.get("platformName"),
            capabilities={k: v for k, v in caps.items() if isinstance(v, str | int | float)},
        )
        self.say(
            f"{self.device.spec}: WebDriver session {self.driver.session_id} ({name} "
            f"{self.version or ''} on {caps.get('platformName') or 'an unnamed platform'})"
        )

    def __exit__(self, *exc: object) -> None:
        self.facts["webdriver"]["page_requests"] = self.server.requests
        ended = self.driver.quit()
        if not ended:
            self.say(f"{self.device.spec}: the WebDriver server was gone; no session to end")
        self._sweep()

    def _sweep(self) -> None:
        """On loopback, kill every process of this session's browser still alive (the server
        may have died without ending it)."""
        if is_loopback(self.device.url):
            kill_tagged([f"{MARKER_SWITCH}={self.token}"])

    # -- the page ----------------------------------------------------------------------------
    def page_url(self, url: str) -> str:
        """The job URL as the browser reaches it: the public URL with the token path."""
        if self.device.public_url is None:
            return url
        path = url.split("/", 3)[3]
        return f"{self.device.public_url.rstrip('/')}/{path}"

    def open(self, url: str) -> None:
        if self.transport is not None:
            self.transport.open()
            return
        target = self.page_url(url)
        self.say(f"{self.device.spec}: the browser opens the job page ({_origin(target)})")
        self._command(self.driver.navigate, target)

    def wait(self, seconds: float) -> None:
        time.sleep(seconds)
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + CHECK_SECONDS
            self._console()
        if self.transport is not None:
            self.transport.drain()

    def _console(self) -> None:
        """The browser's console lines (they also prove the server answers)."""
        entries = self._command(self.driver.browser_log)
        if not self.driver.has_log:
            self._command(self.driver.ping)
        for entry in entries or []:
            level = str(entry.get("level", "INFO")).upper()
            self.on_console(_LEVELS.get(level, level.lower()), _log_text(entry))

    def _command(self, call: Callable[..., Any], *args: Any) -> Any:
        """A WebDriver command; a crashed tab marks the page crashed, a vanished server is one
        DeviceError line; after Ctrl-C (seen by the main thread) none is sent: the session
        ends."""
        if signal_received():
            raise DeviceError(f"{self.device.spec}: interrupted")
        try:
            return call(*args)
        except ServerGone as exc:
            raise DeviceError(f"{self.device.spec}: {exc}") from None
        except WebDriverError as exc:
            if "crashed" in str(exc):
                self.crashed = True
                return None
            raise DeviceError(f"{self.device.spec}: {exc}") from None


class _SessionTransport:
    """The page through the WebDriver session alone (see the module docstring): files pushed
    with execute, the page's posts pulled with execute and stored by the job's server object."""

    def __init__(self, page: _WebDriverPage) -> None:
        self.page = page
        self.server = page.server
        self.spec = page.device.spec
        self._partial: dict[str, bytearray] = {}
        self.pushed = 0

    def _run(self, script: str, *args: Any) -> Any:
        return self.page._command(self.page.driver.execute, script, *args)

    def open(self) -> None:
        self.page._command(self.page.driver.navigate, self.page.device.start_page)
        self._run((PAGE_DIR / "session.js").read_text())
        start = time.monotonic()
        for rel in _page_files(self.server):
            self._push(rel)
        self.page.say(
            f"{self.spec}: pushed the page, LiteRT.js and the job through the session "
            f"({self.pushed / 1e6:.1f} MB in {time.monotonic() - start:.1f} s)"
        )
        self._run("return tflkitStore.start()")

    def _push(self, rel: str) -> None:
        found = self.server.resolve_get(rel)
        if found is None:
            raise DeviceError(f"{self.spec}: the job has no {rel} to push")
        body = found[0].read_bytes() if isinstance(found[0], Path) else found[0]
        script = "return tflkitStore.put(arguments[0], arguments[1], arguments[2])"
        for at in range(0, max(len(body), 1), CHUNK):
            part = body[at : at + CHUNK]
            self._run(script, rel, base64.b64encode(part).decode(), at == 0)
            self.pushed += len(part)

    def drain(self) -> None:
        """Pull what the page posted, in chunks of at most :data:`CHUNK` bytes."""
        for chunk in self._run("return tflkitStore.take(arguments[0])", CHUNK) or []:
            self._receive(chunk)

    def _receive(self, chunk: Mapping[str, Any]) -> None:
        """One chunk of a post: when its body is whole, the job's server stores it."""
        rel, total = str(chunk["path"]), int(chunk["total"])
        data = base64.b64decode(chunk.get("data") or "")
        body = self._partial.setdefault(rel, bytearray())
        if int(chunk["offset"]) != len(body):
            raise DeviceError(f"{self.spec}: the page's {rel} arrived out of order")
        body += data
        if len(body) < total:
            return
        del self._partial[rel]
        if not self.server.accept_post(rel, io.BytesIO(bytes(body)).read, total):
            raise DeviceError(f"{self.spec}: the page posted to an unknown path {rel!r}")


def _page_files(server: Any) -> list[str]:
    """Every path the page fetches (relative to its URL), in the order it needs them."""
    job = server.job
    files = ["session.json", "job/job.json", "job/model"]
    for s, entries in enumerate(job.get("input_sets") or []):
        files += [f"job/input/{s}/{k}" for k in range(len(entries))]
    build = server.session.get("wasm_build")
    name = "litert_wasm_threaded_internal" if build == "threads" else "litert_wasm_jspi_internal"
    files += [
        "litertjs/wasm-utils/dist/index.js",
        "litertjs/core/dist/index.js",
        f"litertjs/core/wasm/{name}.js",
        f"litertjs/core/wasm/{name}.wasm",
        "harness.js",
    ]
    return files


def _host_port(host: str | None, public_url: str | None) -> tuple[str, int]:
    """Where the job's server listens: ``--host HOST[:PORT]`` (default 127.0.0.1); the port is
    the one given there, else the public URL's explicit port (a tunnel or a LAN address that
    forwards the same port), else any free one."""
    name, sep, number = (host or "127.0.0.1").rpartition(":")
    if not sep or "]" in number or (":" in name and not name.startswith("[")):
        name, number = host or "127.0.0.1", ""
    if number and not number.isdigit():
        raise UsageError(f"--host takes HOST or HOST:PORT, got {host!r}")
    port = int(number) if number else urlsplit(public_url or "").port or 0
    return name.strip("[]"), port


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _log_text(entry: Mapping[str, Any]) -> str:
    """ChromeDriver's console entry ``URL LINE:COL "text"`` -> the text."""
    message = str(entry.get("message", ""))
    match = _QUOTED.match(message)
    if match:
        with contextlib.suppress(ValueError):
            return str(json.loads(match[1]))
    return message


# -- from the command line and devices.toml --------------------------------------------------------


def webdriver_devices(
    specs: list[str],
    *,
    capabilities: str | Path | None = None,
    via: str | None = None,
    public_url: str | None = None,
    host: str | None = None,
) -> dict[str, WebDriverDevice]:
    """The WebDriver devices among ``specs``: ``webdriver:URL`` and names whose ``devices.toml``
    entry says ``device = "webdriver:URL"`` (with its ``capabilities``: a JSON file or a table,
    ``via``, ``public_url``, ``host``, ``start_page``); the command line's options win."""
    from tflkit.harness.config import configured_devices

    from .webdriver import read_capabilities

    given = read_capabilities(capabilities) if capabilities is not None else None
    named = {}
    if any(":" not in s and s not in ("local", "browser", "url") for s in specs):
        named = configured_devices()
    found: dict[str, WebDriverDevice] = {}
    for spec in specs:
        entry = {"device": spec} if spec.startswith("webdriver:") else named.get(spec) or {}
        target = str(entry.get("device", ""))
        if not target.startswith("webdriver:"):
            continue
        caps = entry.get("capabilities")
        if given is not None:
            caps = given
        elif isinstance(caps, str):
            caps = read_capabilities(caps)
        found[spec] = WebDriverDevice(
            parse_webdriver_spec(target),
            capabilities=caps if isinstance(caps, dict) else None,
            name=spec if spec != target else None,
            via=via if via in MODES else entry.get("via"),
            public_url=public_url or entry.get("public_url"),
            host=host or entry.get("host"),
            start_page=entry.get("start_page"),
        )
    adb = any(s.startswith("adb:") for s in specs)
    if found and via is not None and via not in MODES and not adb:
        raise UsageError(f"--via takes {' or '.join(MODES)} for a WebDriver device, got {via!r}")
    return found
