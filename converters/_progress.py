"""Progress of a converter environment build on stderr (it takes minutes on first use), and
the one cleaning of text foreign tools print (pip, onnx2tf) before tflkit shows it."""

from __future__ import annotations

import re
import sys
import time
from typing import Any

__all__ = ["BuildProgress", "pip_step", "plain", "without_escapes"]

#: ANSI escape sequences (colours, cursor moves) that converters and pip print.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
#: pip lines a person follows a build by, and what the progress says for each.
_PIP_STEPS = (
    (re.compile(r"Collecting (\S+)"), "resolving {0}"),
    (re.compile(r"Downloading (?:\S+/)?(\S+?)(?: \((.+)\))?$"), "downloading {0}"),
    (re.compile(r"Using cached (?:\S+/)?(\S+)"), "cached {0}"),
    (re.compile(r"Building wheels? for (\S+)"), "building {0}"),
    (re.compile(r"Installing build dependencies"), "installing build dependencies"),
    (re.compile(r"Installing collected packages: (.+)"), "installing {count} packages"),
)


def without_escapes(text: str | None) -> str:
    """``text`` without escape codes, its lines kept (a converter's log)."""
    return _ANSI.sub("", text or "")


def plain(text: str | None) -> str:
    """``text`` without escape codes, on one line (what an error message or a spinner shows)."""
    return " ".join(_ANSI.sub("", text or "").split())


def pip_step(line: str) -> str | None:
    """What a build step line says in tflkit's words, or None for a line that is not a step
    (pip's warnings and notices, "Successfully installed ...", "Requirement already ...").
    tflkit's own lines ("creating ...", "waiting ...") pass as they are."""
    text = plain(line)
    if text.startswith(("creating", "waiting")):
        return text
    for pattern, words in _PIP_STEPS:
        found = pattern.match(text)
        if found:
            names = found.group(1).split(", ")
            return words.format(*found.groups(), count=len(names))
    return None


class BuildProgress:
    """A spinner with the build's current step on a terminal; the main steps as plain lines
    otherwise (the steps come through :func:`pip_step`)."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._status: Any = None
        self._start = 0.0
        self._last = ""

    def __enter__(self) -> BuildProgress:
        self._start = time.perf_counter()
        if sys.stderr.isatty():
            from rich.console import Console

            self._status = Console(stderr=True).status(self.title)
            self._status.start()
        else:
            print(f"tflkit: {self.title}", file=sys.stderr, flush=True)
        return self

    def __call__(self, line: str) -> None:
        step = plain(line)
        if self._status is not None:
            elapsed = time.perf_counter() - self._start
            from rich.text import Text

            self._status.update(Text(f"{self.title} [{elapsed:.0f} s] {step[:100]}"))
        elif step != self._last and step.startswith(("creating", "waiting", "installing")):
            print(f"tflkit: {step[:160]}", file=sys.stderr, flush=True)
        self._last = step

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self._status is not None:
            self._status.stop()
        if kind is None:
            elapsed = time.perf_counter() - self._start
            print(f"tflkit: done in {elapsed:.0f} s", file=sys.stderr, flush=True)
