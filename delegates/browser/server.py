"""The browser harness's local HTTP server: one job, one secret, gone when the job ends.

It serves the page, LiteRT.js (from the cache: nothing from a CDN) and the job's files, and takes
what the page posts back (events as JSON, each output of each run as raw bytes). Safety:

- bound to 127.0.0.1 unless the caller names another interface (then one warning line: the model
  and its inputs are reachable from the network while the job runs);
- every URL path starts with a random token (``secrets.token_urlsafe``); any request without it
  gets a bare 404, so another local user or a web page in another browser cannot read the model
  or post a forged result without the token;
- ``Cross-Origin-Opener-Policy: same-origin`` and ``Cross-Origin-Embedder-Policy: require-corp``
  on every answer: the page is cross-origin isolated, so LiteRT.js's threaded Wasm gets
  ``SharedArrayBuffer``;
- only files under the page folder, the LiteRT.js folder and the job's own files are served; a
  posted body goes to a file in the server's work folder under a name the server builds.

The standard library's ``ThreadingHTTPServer`` runs in a daemon thread; :meth:`JobServer.close`
(or leaving the ``with`` block) shuts it down.
"""

from __future__ import annotations

import http.server
import json
import mimetypes
import queue
import re
import secrets
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np

from .errors import BrowserHarnessError

__all__ = ["PAGE_DIR", "JobServer"]

PAGE_DIR = Path(__file__).with_name("page")
MAX_POST_BYTES = 4 << 30
_OUTPUT = re.compile(r"^output/(\d+)/([a-z0-9_]+)/(\d+)/(\d+)/(\d+)$")
_INPUT = re.compile(r"^job/input/(\d+)/(\d+)$")
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".wasm": "application/wasm",
    ".map": "application/json",
}
_CHUNK = 1 << 20


def _inside(root: Path, rel: str) -> Path | None:
    """``root / rel`` when it is a file inside ``root`` (no ``..``, no link out), else None."""
    try:
        path = (root / rel).resolve()
        base = root.resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    if not path.is_relative_to(base) or not path.is_file():
        return None
    return path


class _QuietServer(http.server.ThreadingHTTPServer):
    """The standard server, minus its traceback on stderr when a browser drops a connection
    (a page closed or a browser killed mid-request is not tflkit's error)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class JobServer:
    """Serve one job to the page and collect what it posts.

    ``events`` is a queue of the page's JSON events (each with ``_received``, a monotonic time);
    outputs land in ``work/out/<session>/<backend>/<set>/<run>/<k>.bin``. ``session`` (a dict) is
    what the page reads from ``session.json``; set it before each page starts.
    """

    def __init__(
        self,
        job_dir: Path,
        job: dict[str, Any],
        litertjs_dir: Path,
        work: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        page_dir: Path | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.job_dir = Path(job_dir)
        self.job = job
        self.litertjs_dir = Path(litertjs_dir)
        self.page_dir = Path(page_dir) if page_dir is not None else PAGE_DIR
        self.work = Path(work)
        self.token = secrets.token_urlsafe(24)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.session: dict[str, Any] = {}
        self.refused: list[str] = []  # request lines answered 404 for want of the token
        self.requests = 0
        self.host = host
        self._lock = threading.Lock()
        if host not in ("127.0.0.1", "localhost", "::1"):
            (warn or _warn)(
                f"the browser harness serves on {host}: the model and its inputs are reachable "
                "from the network (with the job's token) while the job runs"
            )
        handler = type("Handler", (_Handler,), {"server_ref": self})
        try:
            self._httpd = _QuietServer((host, port), handler)
        except OSError as exc:
            raise BrowserHarnessError(f"cannot serve the job on {host}:{port}: {exc}") from None
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name="tflkit-browser-server", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The page's URL, token included; a browser on this machine opens it."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/{self.token}/"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> JobServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the handler asks -----------------------------------------------------------------
    def resolve_get(self, rel: str) -> tuple[bytes | Path, str] | None:
        """The body (bytes or a file) and content type for ``rel``, or None (404)."""
        if rel in ("", "index.html"):
            path = _inside(self.page_dir, "index.html")
            return (path, _TYPES[".html"]) if path else None
        if rel == "harness.js":
            path = _inside(self.page_dir, "harness.js")
            return (path, _TYPES[".js"]) if path else None
        if rel == "session.json":
            return json.dumps(self.session).encode(), _TYPES[".json"]
        if rel == "job/job.json":
            return json.dumps(self.job).encode(), _TYPES[".json"]
        if rel == "job/model":
            path = _inside(self.job_dir, self.job["model"]["file"])
            return (path, "application/octet-stream") if path else None
        match = _INPUT.match(rel)
        if match:
            return self._input(int(match[1]), int(match[2]))
        for prefix, folder in (("litertjs/core/", "core"), ("litertjs/wasm-utils/", "wasm-utils")):
            if rel.startswith(prefix):
                path = _inside(self.litertjs_dir / folder, rel[len(prefix) :])
                if path is None:
                    return None
                kind = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0]
                return path, kind or "application/octet-stream"
        return None

    def _input(self, s: int, k: int) -> tuple[bytes, str] | None:
        """One input as raw little-endian bytes, whatever the job's input format."""
        try:
            entry = self.job["input_sets"][s][k]
        except (IndexError, KeyError, TypeError):
            return None
        path = _inside(self.job_dir, entry["file"])
        if path is None:
            return None
        dtype = np.dtype(entry["dtype"]).newbyteorder("<")
        if path.suffix == ".npy":
            array = np.load(path, allow_pickle=False)
            data = np.ascontiguousarray(array, dtype=dtype).tobytes()
        else:
            data = path.read_bytes()
        return data, "application/octet-stream"

    def accept_post(self, rel: str, read: Callable[[int], bytes], length: int) -> bool:
        """Store a posted event or output; False for an unknown path (404)."""
        if rel == "event":
            if length > 64 << 20:
                return False
            try:
                event = json.loads(_read_all(read, length))
            except ValueError:
                return False
            if not isinstance(event, dict):
                return False
            event["_received"] = time.monotonic()
            self.events.put(event)
            return True
        match = _OUTPUT.match(rel)
        if not match:
            return False
        session, backend, s, run, k = match.groups()
        path = self.work / "out" / session / backend / s / run / f"{k}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            left = length
            while left > 0:
                chunk = read(min(left, _CHUNK))
                if not chunk:
                    raise ConnectionError("the page closed the connection mid-output")
                out.write(chunk)
                left -= len(chunk)
        return True


def _read_all(read: Callable[[int], bytes], length: int) -> bytes:
    parts, left = [], length
    while left > 0:
        chunk = read(min(left, _CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _warn(line: str) -> None:
    print(f"tflkit: warning: {line}", file=sys.stderr, flush=True)


class _Handler(http.server.BaseHTTPRequestHandler):
    server_ref: JobServer
    protocol_version = "HTTP/1.1"
    server_version = "tflkit-browser-harness"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the job has its own log
        pass

    def _rel(self) -> str | None:
        """The path after ``/<token>/``, or None when the token is missing or wrong."""
        path = unquote(urlsplit(self.path).path)
        first, _, rest = path.lstrip("/").partition("/")
        if not secrets.compare_digest(first.encode(), self.server_ref.token.encode()):
            return None
        if not path.lstrip("/").startswith(first + "/"):
            return None
        return rest

    def _headers(self, status: int, kind: str | None, length: int) -> None:
        self.send_response(status)
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        if kind:
            self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(length))
        self.end_headers()

    def _not_found(self, refused: bool) -> None:
        if refused:
            with self.server_ref._lock:
                self.server_ref.refused.append(self.requestline)
        self._headers(404, "text/plain; charset=utf-8", 10)
        if self.command != "HEAD":
            self.wfile.write(b"not found\n")

    def do_GET(self) -> None:
        with self.server_ref._lock:
            self.server_ref.requests += 1
        rel = self._rel()
        if rel is None:
            self._not_found(True)
            return
        try:
            found = self.server_ref.resolve_get(rel)
        except (OSError, ValueError) as exc:
            self._headers(500, "text/plain; charset=utf-8", len(str(exc).encode()))
            self.wfile.write(str(exc).encode())
            return
        if found is None:
            self._not_found(False)
            return
        body, kind = found
        if isinstance(body, Path):
            size = body.stat().st_size
            self._headers(200, kind, size)
            with open(body, "rb") as handle:
                while chunk := handle.read(_CHUNK):
                    self.wfile.write(chunk)
        else:
            self._headers(200, kind, len(body))
            self.wfile.write(body)

    def do_POST(self) -> None:
        with self.server_ref._lock:
            self.server_ref.requests += 1
        rel = self._rel()
        if rel is None:
            # drain nothing: the connection closes after the answer
            self.close_connection = True
            self._not_found(True)
            return
        try:
            length = int(self.headers.get("Content-Length", "-1"))
        except ValueError:
            length = -1
        if length < 0 or length > MAX_POST_BYTES:
            self.close_connection = True
            self._headers(411 if length < 0 else 413, None, 0)
            return
        try:
            ok = self.server_ref.accept_post(rel, self.rfile.read, length)
        except (OSError, ConnectionError):
            self.close_connection = True
            return
        if not ok:
            self.close_connection = True
            self._not_found(False)
            return
        self._headers(204, None, 0)

    def do_HEAD(self) -> None:
        self.close_connection = True
        self._not_found(self._rel() is None)
