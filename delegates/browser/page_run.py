"""One session of the browser harness's page: open it in a browser, follow what it posts.

:func:`run_session` opens the job page in one browser (a local headless Chromium, or whatever an
``opener`` gives: a device's browser, a WebDriver session) and returns when the page is done, a
backend timed out, or the renderer crashed; the backends still pending then run in a fresh
session (:func:`tflkit.delegates.browser.job.run_browser_job`). :class:`Console` splits the
browser's console lines by backend with the page's ``tflkit: backend NAME start|end`` lines.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .chromium import Chromium
from .errors import BrowserTimeoutError
from .server import JobServer

__all__ = [
    "HELLO_SECONDS",
    "Backends",
    "Console",
    "Opener",
    "SessionPlan",
    "run_session",
    "unavailable",
]

#: Time the page gets to say hello after the browser opened it, within the job's timeout.
HELLO_SECONDS = 60.0
_MARKER = re.compile(r"^tflkit: backend (\S+) (start|end)$")

#: Opens the page in a browser tflkit does not launch itself (see ``run_browser_job``).
Opener = Callable[..., Any]


class Console:
    """The browser's console lines (Playwright's view: Chromium's own WebGPU warnings included),
    split by backend with the page's ``tflkit: backend NAME start|end`` lines."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.by_backend: dict[str, list[str]] = {}
        self.all: list[str] = []

    def __call__(self, kind: str, text: str) -> None:
        line = f"{kind}: {text}"
        self.all.append(line)
        marker = _MARKER.match(text.strip())
        if marker:
            self.current = marker[1] if marker[2] == "start" else None
            return
        if self.current is not None:
            self.by_backend.setdefault(self.current, []).append(line)

    def tail(self, count: int = 12) -> str:
        lines = [ln for ln in self.all if not ln.startswith(("debug:",))][-count:]
        return " | ".join(ln[:300] for ln in lines) or "(nothing)"


@dataclass
class _State:
    hello: dict[str, Any] | None = None
    ready: dict[str, Any] | None = None
    fatal: str | None = None
    done: bool = False
    current: str | None = None
    current_start: float = 0.0


@dataclass
class Backends:
    """What the sessions of one job share: the backends still to run, each one's record and the
    session that ran it, and what the pages said about the browser."""

    pending: list[str]
    records: dict[str, dict[str, Any]]
    session_of: dict[str, int] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class SessionPlan:
    """How one session runs: the adapter, the Chromium to launch (or the ``opener`` that gives
    a browser), the job, when the job started and its whole ``timeout``."""

    adapter: str
    chromium: str
    job: dict[str, Any]
    start: float
    timeout: float
    say: Callable[[str], None]
    opener: Opener | None = None


def unavailable(backend: str, why: str) -> dict[str, Any]:
    """A backend record that says the backend did not run, and why."""
    return {"backend": backend, "status": "unavailable", "error": why, "outputs": []}


def _failed(backend: str, status: str, error: str) -> dict[str, Any]:
    return {**unavailable(backend, ""), "status": status, "error": error}


def _launch(server: JobServer, plan: SessionPlan, console: Console) -> Any:
    """The browser of this session: the opener's, else a local headless Chromium."""
    if plan.opener is not None:
        return plan.opener(server=server, adapter=plan.adapter, on_console=console)
    origin = server.url.split("/", 3)[2]
    extra: tuple[str, ...] = ()
    if not origin.startswith(("127.0.0.1:", "localhost:", "[::1]:")):
        # WebGPU needs a secure context; http on another interface is not one
        extra = (f"--unsafely-treat-insecure-origin-as-secure=http://{origin}",)
    return Chromium(plan.adapter, executable=plan.chromium, on_console=console, extra_flags=extra)


def run_session(
    server: JobServer,
    session_id: int,
    backends: Backends,
    console: Console,
    plan: SessionPlan,
) -> None:
    """One browser, one page; returns when the page is done, a backend timed out or crashed."""
    state = _State()
    with _launch(server, plan, console) as browser:
        backends.facts.setdefault("chromium", browser.version)
        browser.open(server.url)
        opened = time.monotonic()
        hello_seconds = float(getattr(browser, "hello_seconds", HELLO_SECONDS))
        while True:
            browser.wait(0.1)
            _drain(server, session_id, state, backends, plan.say)
            if _settled(server, state, backends, console, browser, plan):
                return
            now = time.monotonic()
            if state.hello is None and (
                now - opened > hello_seconds or now - plan.start > plan.timeout
            ):
                limit = (
                    f"the job's {plan.timeout:g} s"
                    if now - plan.start > plan.timeout
                    else f"{hello_seconds:g} s of opening it"
                )
                origin = server.url.split("/", 3)[2]
                raise BrowserTimeoutError(
                    f"the browser page at {origin} did not report within "
                    f"{limit} ({server.requests} requests served); its console: {console.tail()}"
                )


def _settled(
    server: JobServer,
    state: _State,
    backends: Backends,
    console: Console,
    browser: Any,
    plan: SessionPlan,
) -> bool:
    """Record what ended this session (done, fatal, crash, timeout); False while it runs."""
    pending, records = backends.pending, backends.records
    now = time.monotonic()
    if state.done or not pending:
        for backend in [b for b in pending if b in server.session["backends"]]:
            records[backend] = _failed(
                backend, "run_error", "the page finished without reporting this backend"
            )
            pending.remove(backend)
        return True
    if state.fatal is not None:
        for backend in pending:
            records[backend] = unavailable(backend, state.fatal)
        pending.clear()
        return True
    if browser.crashed:
        victim = state.current or pending[0]
        records[victim] = _failed(
            victim,
            "crashed",
            f"the page's renderer crashed while {victim} ran (last console lines: "
            f"{console.tail(4)})",
        )
        pending.remove(victim)
        return True
    backend_timeout = float(plan.job.get("timeout_seconds", 300.0))
    if state.current is not None and now - state.current_start > backend_timeout:
        records[state.current] = _failed(
            state.current,
            "timeout",
            f"no result within {backend_timeout:g} s (the job's timeout_seconds)",
        )
        pending.remove(state.current)
        return True  # this browser is killed; the next session runs the rest
    if now - plan.start > plan.timeout and state.hello is not None:
        for backend in pending:
            records[backend] = _failed(
                backend,
                "timeout",
                f"the job's {plan.timeout:g} s ran out before {backend} finished",
            )
        pending.clear()
        return True
    return False


def _drain(
    server: JobServer,
    session_id: int,
    state: _State,
    backends: Backends,
    say: Callable[[str], None],
) -> None:
    pending, records, facts = backends.pending, backends.records, backends.facts
    while not server.events.empty():
        event = server.events.get_nowait()
        if event.get("session", session_id) != session_id:
            continue  # a killed session's page
        kind = event.get("type")
        if kind == "hello":
            state.hello = event
            for key in ("user_agent", "cross_origin_isolated", "hardware_concurrency"):
                facts[key] = event.get(key)
        elif kind == "ready":
            state.ready = event
            if event.get("gpu"):
                facts["webgpu"] = event["gpu"]
            facts["webgpu_reason"] = event.get("webgpu_reason")
            facts["wasm_build"] = event.get("wasm_build")
        elif kind == "backend_start":
            state.current = event.get("backend")
            state.current_start = event["_received"]
        elif kind == "backend_done":
            record = event.get("record") or {}
            name = record.get("backend")
            if name in pending:
                records[name] = record
                backends.session_of[name] = session_id
                pending.remove(name)
                say(f"browser: {name} {record.get('status')}")
            state.current = None
        elif kind == "done":
            state.done = True
        elif kind == "fatal":
            state.fatal = str(event.get("error") or "the page failed")
