"""Record a device's Python in the devices file (``devices.toml``) for later ``--device`` runs.

The file is edited line by line so the user's comments and layout stay; the edit is checked by
parsing the new text and comparing it with the expected tables, and written atomically.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from tflkit import fsio
from tflkit.harness.config import config_path, configured_devices
from tflkit.harness.setup import SetupError

__all__ = ["record_python"]


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


_HEADER = re.compile(r"^\s*\[(?!\[)")
_PYTHON_LINE = re.compile(
    r"^(?P<head>\s*python\s*=\s*)(?P<value>\"(?:[^\"\\]|\\.)*\"|'[^']*')(?P<tail>\s*(?:#.*)?)$"
)


def _header_name(line: str) -> str | None:
    try:
        parsed = tomllib.loads(line + "\n")
    except tomllib.TOMLDecodeError:
        return None
    if len(parsed) == 1:
        name, value = next(iter(parsed.items()))
        if value == {}:
            return name
    return None


def _set_python(text: str, name: str, python: str) -> str | None:
    """``text`` with ``[name]``'s python set; None when a line edit cannot find the table."""
    lines = text.splitlines(keepends=True)
    start = next(
        (i for i, line in enumerate(lines) if _HEADER.match(line) and _header_name(line) == name),
        None,
    )
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if _HEADER.match(lines[i])), len(lines))
    newline = "\r\n" if lines[start].endswith("\r\n") else "\n"
    for i in range(start + 1, end):
        if re.match(r"^\s*python\s*=", lines[i]):
            match = _PYTHON_LINE.match(lines[i].rstrip("\r\n"))
            if match is None:
                return None
            lines[i] = f"{match['head']}{_toml_string(python)}{match['tail']}{newline}"
            return "".join(lines)
    if not lines[start].endswith(("\n", "\r\n")):
        lines[start] += newline
    lines.insert(start + 1, f"python = {_toml_string(python)}{newline}")
    return "".join(lines)


def record_python(
    name_or_spec: str,
    spec: str,
    python: str,
    *,
    identity: Path | None = None,
    ssh_config: Path | None = None,
    note: str = "",
) -> dict[str, Any]:
    """Make later ``--device name_or_spec`` use ``python``: see the module docstring."""
    path = config_path()
    devices = configured_devices()  # a malformed file stops here, untouched
    if ":" not in name_or_spec and name_or_spec in devices:
        names = [name_or_spec]
    else:
        names = [n for n, entry in devices.items() if entry["device"] == spec]
    text = path.read_bytes().decode("utf-8") if path.is_file() else ""  # CRLF kept as it is
    expected = copy.deepcopy(tomllib.loads(text)) if text else {}
    if names and all(devices[n].get("python") == python for n in names):
        return {"path": str(path), "entries": names, "action": "unchanged"}
    new: str | None = text
    if names:
        for name in names:
            expected[name]["python"] = python
            new = _set_python(new, name, python) if new is not None else None
        action = "updated"
    else:
        names = [spec]
        entry: dict[str, Any] = {"device": spec, "python": python}
        if identity is not None:
            entry["identity"] = str(identity.expanduser().resolve())
        if ssh_config is not None:
            entry["ssh_config"] = str(ssh_config.expanduser().resolve())
        expected[spec] = entry
        block = "".join(f"{k} = {_toml_string(v)}\n" for k, v in entry.items())
        comment = f"# {note}\n" if note else ""
        sep = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
        new = f"{text}{sep}{comment}[{_toml_string(spec)}]\n{block}"
        action = "added"
    try:
        ok = new is not None and tomllib.loads(new) == expected
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok or new is None:
        raise SetupError(
            f"the venv is ready, but {path} could not be edited safely: add "
            f"python = {_toml_string(python)} to [{names[0]}] yourself"
        )
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    fsio.write_atomic(path, new.encode("utf-8"))
    if mode is not None:
        with contextlib.suppress(OSError):
            os.chmod(path, mode)
    return {"path": str(path), "entries": names, "action": action}
