"""Named devices from ``$XDG_CONFIG_HOME/tflkit/devices.toml`` (default ``~/.config``).

```toml
[rpi5]
device = "ssh:pi@rpi5.local"            # or "adb:SERIAL", "local"
python = "/home/pi/venv/bin/python"     # the device's Python with numpy and ai-edge-litert
identity = "~/.ssh/id_ed25519"          # ssh only
ssh_config = "~/.ssh/config-lab"        # ssh only (ssh -F)
workdir = "/tmp/tflkit-jobs"            # where jobs go on the device

[pixel8]
device = "webdriver:http://127.0.0.1:4723"   # a W3C WebDriver server (Appium, a Grid, a farm)
capabilities = "~/caps/pixel8.json"          # W3C capabilities: a JSON file, or a table
public_url = "https://tunnel.example"        # optional: how the phone reaches this machine
```

``--device rpi5`` then means that device with those settings (command-line options win), and so
does ``--device ssh:pi@rpi5.local`` (the first entry whose ``device`` is exactly that spec).
``tflkit device setup`` sets ``python`` there, or adds an entry named after the spec.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from tflkit.errors import UsageError

__all__ = ["KEYS", "config_path", "configured_devices", "settings_for"]

KEYS = {"device", "python", "identity", "ssh_config", "workdir"}
#: a ``webdriver:URL`` device's own (``tflkit.harness.browser.webdriver_device``)
WEBDRIVER_KEYS = {"capabilities", "via", "public_url", "host", "start_page"}


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tflkit" / "devices.toml"


def configured_devices() -> dict[str, dict[str, Any]]:
    """Name -> settings; empty when there is no file. A malformed file is a usage error."""
    path = config_path()
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    devices = {}
    for name, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("device"), str):
            raise UsageError(
                f'{path}: [{name}] needs device = "adb:...", "ssh:...", "webdriver:..." or "local"'
            )
        unknown = set(entry) - KEYS - WEBDRIVER_KEYS
        if unknown:
            raise UsageError(f"{path}: [{name}] has unknown keys {sorted(unknown)}")
        devices[name] = entry
    return devices


def settings_for(spec: str) -> dict[str, Any]:
    """The first entry whose ``device`` is exactly ``spec`` (``adb:...``, ``ssh:...``), or {}."""
    for entry in configured_devices().values():
        if entry["device"] == spec:
            return entry
    return {}
