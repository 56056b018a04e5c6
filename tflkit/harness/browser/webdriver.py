"""A W3C WebDriver client over HTTP (the standard library's ``urllib``), just what the browser
harness needs: one session, navigate, execute a script, the browser's console
(ChromeDriver's ``se/log``, where the server has it), end the session.

The protocol is W3C WebDriver (``POST /session``, ``POST /session/ID/url``, ``POST
/session/ID/execute/sync``, ``DELETE /session/ID``): ChromeDriver, Appium, a Selenium Grid
and cloud device farms all speak it. Capabilities come from the user (``--capabilities FILE``, a
``devices.toml`` entry) and are merged over :func:`default_capabilities` into the new-session
request's ``alwaysMatch``; a file may also be a whole request (``{"capabilities": {"alwaysMatch":
..., "firstMatch": [...]}}``).

A ``user:password@`` in the URL (a cloud farm's user and key) is sent as HTTP basic auth and
never shown: error lines and reports carry the URL without the password.

Errors: :class:`WebDriverError` (exit code 4 in the CLI) with one line: the server refused the
session (its W3C error and message), a command failed, or :class:`ServerGone` when the server
stopped answering (connection refused or reset, no answer within the request's time).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from tflkit.errors import UsageError
from tflkit.harness.transport import DeviceError

__all__ = [
    "ServerGone",
    "WebDriver",
    "WebDriverError",
    "default_capabilities",
    "is_loopback",
    "new_session_body",
    "read_capabilities",
    "without_secret",
]

#: Seconds for one command (a chunk pushed or pulled, a navigation); a new session gets more.
COMMAND_SECONDS = 60.0
SESSION_SECONDS = 180.0
#: A page script (a chunk pushed, a drain) must answer within this (W3C ``script`` timeout).
SCRIPT_MS = 120_000


class WebDriverError(DeviceError):
    """The WebDriver server refused a command or the session (one line; exit code 4)."""


class ServerGone(WebDriverError):
    """The WebDriver server stopped answering (it was stopped, or the network went)."""


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine (127.0.0.0/8, ::1, localhost)."""
    host = (urlsplit(url).hostname or "").lower()
    return host == "localhost" or host == "::1" or host.startswith("127.")


def without_secret(url: str) -> str:
    """``url`` without the password of its ``user:password@`` part (a farm's key): what reports
    and error lines show."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"{parts.username}@{host}").geturl()


def default_capabilities() -> dict[str, Any]:
    """What tflkit asks for when the capabilities do not say: a Chrome-like browser."""
    return {"browserName": "chrome", "timeouts": {"script": SCRIPT_MS}}


def read_capabilities(path: str | Path | None) -> dict[str, Any]:
    """The capabilities in a JSON file (a usage error when it is not a JSON object)."""
    if path is None:
        return {}
    try:
        data = json.loads(Path(path).expanduser().read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"--capabilities {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"--capabilities {path}: a JSON object of W3C capabilities is needed")
    return data


def new_session_body(given: Mapping[str, Any]) -> dict[str, Any]:
    """The ``POST /session`` body: ``given`` (capabilities, or a whole request) merged over
    :func:`default_capabilities` in ``alwaysMatch``; ``firstMatch`` kept when given."""
    if "capabilities" in given and isinstance(given["capabilities"], dict):
        always = dict(given["capabilities"].get("alwaysMatch") or {})
        first = given["capabilities"].get("firstMatch")
    else:
        always, first = dict(given), None
    merged = {**default_capabilities(), **always}
    if "timeouts" not in always:
        merged["timeouts"] = default_capabilities()["timeouts"]
    body: dict[str, Any] = {"capabilities": {"alwaysMatch": merged}}
    if first:
        body["capabilities"]["firstMatch"] = list(first)
    return body


class WebDriver:
    """One W3C WebDriver session at ``url`` (``http://HOST:PORT[/BASE]``)."""

    def __init__(self, url: str, capabilities: Mapping[str, Any]) -> None:
        parts = urlsplit(url.rstrip("/"))
        #: HTTP basic auth from the URL's ``user:password@`` (cloud farms' keys), sent as a header
        self.auth: str | None = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self.auth = "Basic " + base64.b64encode(pair).decode()
            parts = parts._replace(netloc=parts.netloc.rsplit("@", 1)[1])
        self.endpoint = parts.geturl()
        self.url = without_secret(url.rstrip("/"))  # for the lines a user reads
        self.body = new_session_body(capabilities)
        self.session_id: str | None = None
        self.capabilities: dict[str, Any] = {}
        self.has_log = True  # ChromeDriver's se/log; switched off when the server lacks it

    # -- HTTP --------------------------------------------------------------------------------
    def _call(
        self, method: str, path: str, body: Any = None, *, timeout: float = COMMAND_SECONDS
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json; charset=utf-8"}
        if self.auth is not None:
            headers["Authorization"] = self.auth
        request = urllib.request.Request(
            self.endpoint + path, data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                raw = answer.read()
        except urllib.error.HTTPError as exc:
            raise self._refusal(method, path, exc) from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerGone(
                f"the WebDriver server at {self.url} does not answer ({method} {path}: {reason})"
            ) from None
        try:
            return json.loads(raw or b"{}").get("value")
        except (ValueError, AttributeError):
            raise WebDriverError(
                f"the WebDriver server at {self.url} answered {method} {path} with no JSON"
            ) from None

    def _refusal(self, method: str, path: str, exc: urllib.error.HTTPError) -> WebDriverError:
        try:
            value = json.loads(exc.read() or b"{}").get("value") or {}
        except (ValueError, AttributeError, OSError):
            value = {}
        error = value.get("error") or f"HTTP {exc.code}"
        message = " ".join(str(value.get("message") or exc.reason).split())[:500]
        kind = "refused a new session" if path == "/session" else f"refused {method} {path}"
        return WebDriverError(f"the WebDriver server at {self.url} {kind}: {error}: {message}")

    def _session(self, path: str) -> str:
        if self.session_id is None:
            raise WebDriverError("no WebDriver session")
        return f"/session/{self.session_id}{path}"

    # -- commands ----------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        """``POST /session``; the capabilities the server matched."""
        value = self._call("POST", "/session", self.body, timeout=SESSION_SECONDS) or {}
        self.session_id = value.get("sessionId")
        if not self.session_id:
            raise WebDriverError(f"the WebDriver server at {self.url} gave no session id")
        self.capabilities = dict(value.get("capabilities") or {})
        return self.capabilities

    def navigate(self, url: str) -> None:
        self._call("POST", self._session("/url"), {"url": url})

    def execute(self, script: str, *args: Any) -> Any:
        """Run ``script`` (a function body; ``arguments``: ``args``) in the page; its return
        value. Synchronous: the page's own work goes on between calls."""
        body = {"script": script, "args": list(args)}
        # the page's main thread may be busy (a model compiling): wait as long as a script may
        return self._call(
            "POST", self._session("/execute/sync"), body, timeout=SCRIPT_MS / 1000 + 30
        )

    def browser_log(self) -> list[dict[str, Any]]:
        """The browser's console lines since the last call (ChromeDriver's ``se/log``); none
        when the server does not have the command."""
        if not self.has_log or self.session_id is None:
            return []
        try:
            body = {"type": "browser"}
            value = self._call("POST", self._session("/se/log"), body, timeout=30.0)
        except ServerGone:
            raise
        except WebDriverError:
            self.has_log = False
            return []
        return [e for e in value or [] if isinstance(e, dict)]

    def ping(self) -> None:
        """Ask the session something cheap; :class:`ServerGone` when nobody answers."""
        self._call("GET", self._session("/url"), timeout=30.0)

    def quit(self) -> bool:
        """``DELETE /session/ID``; True when the server ended it (False: it was gone)."""
        if self.session_id is None:
            return True
        session, self.session_id = self.session_id, None
        try:
            self._call("DELETE", f"/session/{session}", timeout=30.0)
        except WebDriverError:
            return False
        return True
