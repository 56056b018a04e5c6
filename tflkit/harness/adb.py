"""Android phones and adbd boards over ``adb``: the tflkit app's instrumentation on a phone, the
one-file Linux harness on a device running adbd (told apart by ``getprop``)."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tflkit.delegates.device_protocol import DeviceResult
from tflkit.errors import UsageError
from tflkit.harness.transport import (
    COMMAND_TIMEOUT,
    HARNESS_SENTINEL,
    Completed,
    DeviceError,
    Progress,
    ShellDevice,
    check_harness,
    last_line,
    run_command,
)
from tflkit.proc.interrupts import signal_received
from tflkit.report.progress import quiet

__all__ = ["AdbDevice", "AdbTarget", "adb_devices"]

_ANDROID_PACKAGE = "dev.tflkit.harness"
_ANDROID_RUNNER = f"{_ANDROID_PACKAGE}/.JobInstrumentation"


@dataclass
class AdbTarget:
    """One line of ``adb devices -l``."""

    serial: str
    state: str
    details: dict[str, str] = field(default_factory=dict)


def adb_devices(timeout: float = 30.0) -> list[AdbTarget]:
    """The devices the adb server knows (empty when adb is not installed)."""
    if shutil.which("adb") is None:
        return []
    done = run_command(["adb", "devices", "-l"], timeout=timeout)
    targets = []
    for line in done.stdout.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2:
            details = dict(p.split(":", 1) for p in parts[2:] if ":" in p)
            targets.append(AdbTarget(parts[0], parts[1], details))
    return targets


class AdbDevice(ShellDevice):
    """``adb:SERIAL``: an Android phone (the tflkit app) or a Linux device running adbd."""

    def __init__(self, serial: str, *, python: str = "python3", workdir: str | None = None) -> None:
        super().__init__(python, workdir or "/tmp/tflkit-jobs")
        if not serial:
            raise UsageError("--device adb:SERIAL needs a serial (see `adb devices`)")
        self.serial = serial
        self.spec = f"adb:{serial}"
        self._explicit_workdir = workdir is not None
        self._kind: str | None = None

    def _adb(self, *args: str) -> list[str]:
        return ["adb", "-s", self.serial, *args]

    def _fail(self, done: Completed, what: str) -> None:
        if done.timed_out:
            raise DeviceError(f"{self.spec}: {what} did not finish within the time allowed")
        if done.returncode != 0:
            raise DeviceError(f"{self.spec}: {what} failed: {self._why(done)}")

    def connect(self) -> None:
        """Make sure adb sees the device; ``HOST:PORT`` serials are (re)connected first."""
        states = {t.serial: t.state for t in adb_devices()}
        if states.get(self.serial) != "device" and re.fullmatch(r"[\w.\-]+:\d+", self.serial):
            if self.serial in states:  # offline: adb keeps the dead connection until told
                run_command(["adb", "disconnect", self.serial], timeout=COMMAND_TIMEOUT)
            run_command(["adb", "connect", self.serial], timeout=COMMAND_TIMEOUT)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                states = {t.serial: t.state for t in adb_devices()}
                if states.get(self.serial) == "device":
                    break
                time.sleep(0.2)
        state = states.get(self.serial)
        if state != "device":
            raise DeviceError(
                f"{self.spec}: adb does not see the device"
                + (f" (state {state})" if state else "")
                + "; check `adb devices`"
            )

    @property
    def kind(self) -> str:  # type: ignore[override]
        """``android`` when ``getprop`` answers with an SDK level, else ``linux``."""
        if self._kind is None:
            self.connect()
            done = self.shell("getprop ro.build.version.sdk", timeout=COMMAND_TIMEOUT)
            if done.timed_out:
                raise DeviceError(f"{self.spec}: the device did not answer within the time allowed")
            sdk = done.stdout.strip()
            self._kind = "android" if done.returncode == 0 and sdk.isdigit() else "linux"
            if self._kind == "android" and not self._explicit_workdir:
                # the app's own external files folder: adb can write there, the app can read it
                self.workdir = f"/sdcard/Android/data/{_ANDROID_PACKAGE}/files/jobs"
        return self._kind

    def describe(self) -> str:
        if self.kind == "android":
            model = self.shell("getprop ro.product.model", timeout=COMMAND_TIMEOUT).stdout.strip()
            return f"Android device {model or self.serial} (tflkit app)"
        return f"Linux device {self.serial} over adb"

    def shell(self, command: str, *, timeout: float, on_line: Progress | None = None) -> Completed:
        done = run_command(self._adb("shell", command), timeout=timeout, on_line=on_line)
        if not done.timed_out and re.search(r"^(?:adb: )?error: ", done.stderr, re.MULTILINE):
            raise DeviceError(f"{self.spec}: {self._why(done)}")
        return done

    def push(self, local: Path, remote: str) -> None:
        for child in sorted(local.iterdir()):
            done = run_command(
                self._adb("push", str(child), f"{remote}/{child.name}"), timeout=COMMAND_TIMEOUT
            )
            self._fail(done, "pushing the job")

    def pull(self, remote: str, local: Path) -> None:
        done = run_command(self._adb("pull", remote, str(local)), timeout=COMMAND_TIMEOUT)
        self._fail(done, "pulling the result")

    def app_installed(self) -> bool:
        """Whether the tflkit harness app (``dev.tflkit.harness``) is installed (Android)."""
        done = self.shell(f"pm path {_ANDROID_PACKAGE}", timeout=COMMAND_TIMEOUT)
        return "package:" in done.stdout

    # port forwards (the browser harness: the device's browser reaches the host's job server) --
    def reverse(self, host_port: int, device_port: int = 0) -> int:
        """``adb reverse tcp:DEVICE tcp:HOST``: the device's ``127.0.0.1:DEVICE`` reaches this
        machine's ``127.0.0.1:HOST``. ``device_port`` 0 lets adbd pick a free one; returns it."""
        done = run_command(
            self._adb("reverse", f"tcp:{device_port}", f"tcp:{host_port}"),
            timeout=COMMAND_TIMEOUT,
        )
        self._fail(done, f"adb reverse tcp:{device_port} tcp:{host_port}")
        if device_port:
            return device_port
        picked = last_line(done.stdout)
        if not picked.isdigit():
            raise DeviceError(f"{self.spec}: adb reverse tcp:0 did not say which port: {picked!r}")
        return int(picked)

    def reverses(self) -> list[tuple[int, str]]:
        """The device's reverse forwards as (device port, host side such as ``tcp:8080``)."""
        done = run_command(self._adb("reverse", "--list"), timeout=COMMAND_TIMEOUT)
        self._fail(done, "adb reverse --list")
        found = []
        for line in done.stdout.splitlines():
            match = re.search(r"\btcp:(\d+)\s+(\S+)\s*$", line)
            if match:
                found.append((int(match[1]), match[2]))
        return found

    def remove_reverse(self, device_port: int) -> None:
        """``adb reverse --remove tcp:PORT`` (no error when it is already gone)."""
        run_command(self._adb("reverse", "--remove", f"tcp:{device_port}"), timeout=COMMAND_TIMEOUT)

    def run_job(
        self, job: Path, dest: Path, *, timeout: float, progress: Progress | None = None
    ) -> DeviceResult:
        if self.kind == "linux":
            return super().run_job(job, dest, timeout=timeout, progress=progress)
        return self._run_android(job, dest, timeout=timeout, progress=progress)

    def _run_android(
        self, job: Path, dest: Path, *, timeout: float, progress: Progress | None
    ) -> DeviceResult:
        """Push the job, ``am instrument`` the tflkit app, pull the result (see the app README)."""
        say = progress or quiet
        if not self.app_installed():
            raise DeviceError(
                f"{self.spec}: the tflkit harness app ({_ANDROID_PACKAGE}) is not installed; "
                "build and install it as android_harness/README.md says, or run the job in the "
                "device's browser (--via browser)"
            )
        remote = f"{self.workdir}/{uuid.uuid4().hex[:12]}"
        self._quick(f"mkdir -p {shlex.quote(remote)}", "creating the job folder")
        try:
            say(f"{self.spec}: pushing the job")
            push = self._adb("push", str(job), f"{remote}/job")
            done = run_command(push, timeout=COMMAND_TIMEOUT)
            self._fail(done, "pushing the job")
            q = shlex.quote
            base = f"am instrument -w -e job {q(remote + '/job')} -e result {q(remote + '/result')}"
            # a GPU driver abort kills the app: run again with resume, which records that
            # backend as crashed and goes on with the others (one more try per backend)
            for attempt in range(len(_job_backends(job)) + 1):
                resume = " -e resume true" if attempt else ""
                say(f"{self.spec}: running the tflkit app" + (" (resumed)" if attempt else ""))
                run = self.shell(
                    f"{base}{resume} {_ANDROID_RUNNER}; echo {HARNESS_SENTINEL}$?", timeout=timeout
                )
                # am's exit status says little; the instrumentation result says the rest
                check_harness(self.spec, run, timeout, expect_sentinel=True, any_status=True)
                if "Process crashed" not in run.stdout:
                    break
            failed = re.search(r"tflkit-error=(.*)", run.stdout)
            if failed or "tflkit-status=ok" not in run.stdout:
                detail = failed[1] if failed else last_line(run.stdout)
                raise DeviceError(f"{self.spec}: the tflkit app failed: {detail}")
            return self._pull_result(remote, dest, say)
        finally:
            hurry = signal_received()  # the user waits: stop the app, leave its folder
            with contextlib.suppress(DeviceError):
                self.shell(f"am force-stop {_ANDROID_PACKAGE}", timeout=5 if hurry else 30)
                if not hurry:
                    self.shell(f"rm -rf {shlex.quote(remote)}", timeout=30)


def _job_backends(job: Path) -> list[str]:
    try:
        return list(json.loads((job / "job.json").read_text())["backends"])
    except (OSError, ValueError, KeyError):
        return []
