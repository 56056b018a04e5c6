"""The system under tflkit: commands on PATH, Debian package versions, and the install line
for a system package (apt-get where there is apt-get; else what to look for)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["apt_fix", "deb_version", "debian_release", "first_line"]


def first_line(cmd: list[str], timeout: float = 20.0) -> str | None:
    """The first non-empty line ``cmd`` prints (stdout, else stderr), or None if it cannot run."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for text in (done.stdout, done.stderr):
        for line in text.splitlines():
            if line.strip():
                return line.strip()
    return None


def deb_version(package: str) -> str | None:
    """The installed version of a Debian package, or None (not installed, or no dpkg)."""
    line = first_line(["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Version}", package])
    if not line or not line.startswith("ii"):
        return None
    return line.split()[-1]


def debian_release(os_release: Path = Path("/etc/os-release")) -> tuple[str, str]:
    """(ID, VERSION_CODENAME) of this system, e.g. ("debian", "bookworm"); empty when unknown."""
    fields = {}
    try:
        for line in os_release.read_text().splitlines():
            key, _, value = line.partition("=")
            fields[key] = value.strip().strip('"')
    except OSError:
        pass
    return fields.get("ID", ""), fields.get("VERSION_CODENAME", "")


def apt_fix(packages: str, what: str) -> str:
    """The command that installs Debian ``packages``, or a sentence where there is no apt-get."""
    if shutil.which("apt-get"):
        return f"apt-get install -y {packages}"
    return f"install {what} with the system's package manager"
