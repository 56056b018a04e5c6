"""``--device`` specs: ``local``, ``adb:SERIAL``, ``ssh:USER@HOST[:PORT]`` or a configured name."""

from __future__ import annotations

from pathlib import Path

from tflkit.errors import UsageError
from tflkit.harness.adb import AdbDevice
from tflkit.harness.transport import Device, LocalDevice, SshDevice

__all__ = ["parse_device"]


def parse_device(
    spec: str,
    *,
    identity: Path | None = None,
    ssh_config: Path | None = None,
    python: str | None = None,
) -> Device:
    """``local``, ``adb:SERIAL``, ``ssh:USER@HOST[:PORT]`` or a name from the devices file."""
    settings: dict = {}
    if ":" not in spec and spec != "local":
        from tflkit.harness.config import config_path, configured_devices

        named = configured_devices()
        if spec not in named:
            known = ", ".join(sorted(named)) or f"none configured in {config_path()}"
            raise UsageError(
                f"--device takes local, adb:SERIAL, ssh:USER@HOST[:PORT] or a configured name "
                f"({known}), got {spec!r}"
            )
        settings = named[spec]
        spec = settings["device"]
    elif spec.startswith(("adb:", "ssh:")):  # an entry for it (`device setup` writes one)
        from tflkit.harness.config import settings_for

        settings = settings_for(spec)

    def path(value: object) -> Path | None:
        return Path(str(value)).expanduser() if value else None

    identity = identity or path(settings.get("identity"))
    ssh_config = ssh_config or path(settings.get("ssh_config"))
    python = python or settings.get("python")
    workdir = settings.get("workdir")
    scheme, sep, rest = spec.partition(":")
    if spec == "local":
        return LocalDevice(python)
    if sep and scheme == "adb":
        return AdbDevice(rest, python=python or "python3", workdir=workdir)
    if sep and scheme == "ssh":
        return SshDevice(
            rest,
            identity=identity,
            ssh_config=ssh_config,
            python=python or "python3",
            workdir=workdir or "/tmp/tflkit-jobs",
        )
    raise UsageError(
        f"--device takes local, adb:SERIAL, ssh:USER@HOST[:PORT] or a configured name, got {spec!r}"
    )
