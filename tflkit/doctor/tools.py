"""The harnesses' tools: the browser harness (Playwright, Chromium, ChromeDriver, npm, LiteRT.js),
the converter environments, and the devices of ``devices.toml`` with adb and ssh."""

from __future__ import annotations

import shutil

from tflkit.errors import TflkitError, missing_modules

from .items import Item
from .system import apt_fix, first_line

__all__ = ["browser_items", "converter_items", "device_items"]


def _command_item(group: str, name: str, cmd: list[str], packages: str, what: str) -> Item:
    """A command's ``--version`` line, or how to install the Debian ``packages`` with it."""
    found = shutil.which(cmd[0])
    line = first_line(cmd) if found else None
    if found and line:
        return Item(group, name, "ok", f"{line.split(' (')[0]} ({found})")
    if found:
        return Item(group, name, "failed", f"{found} does not run", apt_fix(packages, what))
    return Item(group, name, "missing", f"no {cmd[0]} on PATH", apt_fix(packages, what))


def browser_items() -> list[Item]:
    from tflkit.delegates.browser.chromium import CHROMIUM, chromium_version
    from tflkit.delegates.browser.provision import (
        LITERTJS_VERSION,
        browser_cache_dir,
        find_litertjs,
    )

    items = []
    if missing_modules("browser"):
        items.append(Item("browser", "Playwright", "missing", "the browser extra is not installed",
                          "pip install 'tflkit[browser]'"))  # fmt: skip
    version = chromium_version()
    if version:
        items.append(Item("browser", "Chromium", "ok", f"{version} ({CHROMIUM})"))
    else:
        items.append(Item("browser", "Chromium", "missing", f"no Chromium at {CHROMIUM}",
                          apt_fix("chromium", "Chromium")))  # fmt: skip
    items.append(_command_item("browser", "ChromeDriver", ["chromedriver", "--version"],
                               "chromium-driver", "ChromeDriver"))  # fmt: skip
    items.append(_command_item("browser", "npm", ["npm", "--version"], "nodejs npm", "npm"))
    found = find_litertjs()
    if found:
        items.append(Item("browser", "LiteRT.js", "ok", f"{found.version} in {found.path}"))
    else:
        items.append(
            Item(
                "browser",
                "LiteRT.js",
                "missing",
                f"{LITERTJS_VERSION} not fetched into {browser_cache_dir()} (fetched on first use)",
                "tflkit harness install browser",
            )
        )
    return items


def converter_items() -> list[Item]:
    from tflkit.converters.envs import ROUTES, converters_dir, find_env

    items = []
    for route, specs in ROUTES.items():
        env = find_env(route)
        packages = ", ".join(specs[0].packages)
        if env is not None:
            pinned = ", ".join(env.record.get("packages", [])) or packages
            items.append(Item("converters", route, "ok", f"{pinned} in {env.path}"))
        else:
            items.append(
                Item(
                    "converters",
                    route,
                    "missing",
                    f"{packages}: not built in {converters_dir()} (built on first use)",
                    f"tflkit converters install {route}",
                )
            )
    return items


def device_items() -> list[Item]:
    from tflkit.harness.config import config_path, configured_devices

    items = [
        _command_item("devices", "adb", ["adb", "version"], "adb", "adb (Android platform tools)"),
        _command_item("devices", "ssh", ["ssh", "-V"], "openssh-client", "an OpenSSH client"),
    ]
    path = config_path()
    try:
        devices = configured_devices()
    except TflkitError as exc:
        return [*items, Item("devices", "devices.toml", "failed", str(exc), f"fix {path}")]
    if not devices:
        items.append(Item("devices", "devices.toml", "info",
                          f"no devices configured ({path}); a Linux device is added by: "
                          "tflkit device setup adb:SERIAL (or ssh:USER@HOST)"))  # fmt: skip
    for name, entry in devices.items():
        items.append(Item("devices", name, "info", f"{entry['device']} ({path})"))
    return items
