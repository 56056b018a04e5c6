"""Move a job folder to a device, run it there, bring the result folder back.

Devices: ``local`` (this machine), ``ssh:USER@HOST[:PORT]`` (the OpenSSH client, so the user's
``~/.ssh/config`` applies), ``adb:SERIAL`` (an Android phone running the tflkit app, or a Linux
device running adbd; told apart by ``getprop``). Linux devices run the one-file harness
(``linux_harness.py``, pushed with the job) with their own Python. ``adb:SERIAL --via browser``
and ``url`` (the job in a browser, served from here) live in ``tflkit.harness.browser.remote``;
:class:`AdbDevice` gives them ``adb reverse`` (:meth:`AdbDevice.reverse`).

Every host-side command runs in its own session with a timeout and is killed as a group when it
expires, so nothing is left behind. The result is pulled into a hidden sibling of the destination
and renamed into place only once ``result.json`` reads back, so a failure leaves nothing
half-written. A lost connection, a timeout or a missing tool raises :class:`DeviceError` (one
line, exit code 4).
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tflkit.errors import TflkitError, UsageError
from tflkit.fsio import extract_tar
from tflkit.harness.protocol import DeviceResult, ProtocolError, harness_source, read_result
from tflkit.proc.interrupts import signal_received
from tflkit.proc.worker import own_session

__all__ = [
    "AdbDevice",
    "Device",
    "DeviceError",
    "LocalDevice",
    "SshDevice",
    "parse_device",
]

Progress = Callable[[str], None]
#: Printed by the remote shell after the harness exits; without it the connection dropped.
_SENTINEL = "tflkit-harness-exit:"
_ANDROID_PACKAGE = "dev.tflkit.harness"
_ANDROID_RUNNER = f"{_ANDROID_PACKAGE}/.JobInstrumentation"
#: Seconds for the quick commands (mkdir, push, pull, getprop); the run itself gets the job's.
COMMAND_TIMEOUT = 120.0


class DeviceError(TflkitError):
    """The device could not be reached, dropped the connection, or did not answer in time."""

    exit_code = 4


@dataclass(frozen=True)
class Completed:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool


def run_command(
    cmd: Sequence[str],
    *,
    timeout: float,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    on_line: Progress | None = None,
) -> Completed:
    """Run a host command in its own session (:func:`tflkit.proc.worker.own_session`); kill the
    whole session on timeout.

    ``stdout`` sends the output to a file (binary, e.g. a tar stream); otherwise it is collected,
    and each line is passed to ``on_line`` as it arrives.
    """
    lines: list[str] = []
    errors: list[bytes] = []
    readers: list[threading.Thread] = []
    timed_out = False

    def join_readers() -> None:
        # after Ctrl-C the output is not wanted: do not wait for a pipe a grandchild may hold
        for reader in readers:
            reader.join(timeout=0.5 if signal_received() else 5)

    with contextlib.ExitStack() as stack:
        stack.callback(join_readers)  # last: after the session is killed and reaped
        try:
            proc = stack.enter_context(
                own_session(
                    cmd,
                    stdin=stdin if stdin is not None else subprocess.DEVNULL,
                    stdout=stdout if stdout is not None else subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
            )
        except FileNotFoundError:
            raise DeviceError(f"{cmd[0]} is not installed (needed to reach the device)") from None

        def read_lines() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                lines.append(line)
                if on_line is not None:
                    on_line(line)

        readers.append(
            threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
        )
        if stdout is None:
            readers.append(threading.Thread(target=read_lines, daemon=True))
        for reader in readers:
            reader.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True  # leaving the session kills its group
    err = b"".join(errors).decode("utf-8", "replace")
    return Completed(proc.returncode, "\n".join(lines), err, timed_out)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


class Device:
    """A place that runs jobs. ``spec`` is what the user typed after ``--device``."""

    spec: str
    kind: str = "linux"

    def run_job(
        self,
        job: Path,
        dest: Path,
        *,
        timeout: float,
        progress: Progress | None = None,
    ) -> DeviceResult:
        """Run the job folder ``job`` and write its result folder at ``dest`` (atomically)."""
        raise NotImplementedError

    def describe(self) -> str:
        """One line: what the device is."""
        raise NotImplementedError


def _install(tmp: Path, dest: Path) -> DeviceResult:
    """Validate the pulled result in ``tmp`` and rename it to ``dest``."""
    try:
        read_result(tmp)
    except ProtocolError as exc:
        raise DeviceError(f"the device returned an unusable result: {exc}") from None
    if dest.exists():
        raise UsageError(f"{dest} already exists; refusing to overwrite it")
    tmp.rename(dest)
    return read_result(dest)


@contextlib.contextmanager
def _staging(dest: Path):  # type: ignore[no-untyped-def]
    """A hidden sibling of ``dest`` that is removed unless it was renamed into place."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-partial-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class LocalDevice(Device):
    """This machine, running the Linux harness with a given Python (default: this one)."""

    def __init__(self, python: str | None = None) -> None:

        self.spec = "local"
        self.python = python or sys.executable

    def describe(self) -> str:
        return f"this machine ({self.python})"

    def run_job(
        self, job: Path, dest: Path, *, timeout: float, progress: Progress | None = None
    ) -> DeviceResult:
        with _staging(dest) as tmp:
            out = tmp / "result"
            done = run_command(
                [self.python, str(harness_source()), "run", str(job), str(out)],
                timeout=timeout,
                on_line=_harness_lines(self.spec, progress),
            )
            _check_harness(self.spec, done, timeout, expect_sentinel=False)
            return _install(out, dest)


def _harness_lines(spec: str, progress: Progress | None) -> Progress:
    def on_line(line: str) -> None:
        if progress is not None and line.startswith("tflkit-harness: ") and "running (" not in line:
            progress(f"{spec}: {line.removeprefix('tflkit-harness: ')}")

    return on_line


def _check_harness(
    spec: str, done: Completed, timeout: float, *, expect_sentinel: bool, any_status: bool = False
) -> None:
    if done.timed_out:
        raise DeviceError(f"{spec}: the job did not finish within {timeout:g} s (stopped)")
    code: int | None = done.returncode
    if expect_sentinel:
        match = re.search(rf"^{_SENTINEL}(\d+)\s*$", done.stdout, re.MULTILINE)
        if match is None:
            why = _last_line(done.stderr) or "the connection closed before the harness finished"
            raise DeviceError(f"{spec}: the device disconnected during the job ({why})")
        code = int(match[1])
    if code == 0 or any_status:
        return
    detail = _last_line(done.stderr) or _last_line(done.stdout) or f"exit status {code}"
    detail = detail.removeprefix("tflkit-harness: error: ")
    raise DeviceError(f"{spec}: the harness failed: {detail}")


class ShellDevice(Device):
    """A Linux device reached through a remote shell (ssh, adb): push, run the harness, pull."""

    def __init__(self, python: str = "python3", workdir: str = "/tmp/tflkit-jobs") -> None:
        self.python = python
        self.workdir = workdir

    # transport primitives ------------------------------------------------------------------
    def shell(self, command: str, *, timeout: float, on_line: Progress | None = None) -> Completed:
        raise NotImplementedError

    def push(self, local: Path, remote: str) -> None:
        raise NotImplementedError

    def pull(self, remote: str, local: Path) -> None:
        raise NotImplementedError

    # the job -------------------------------------------------------------------------------
    def _quick(self, command: str, what: str) -> Completed:
        done = self.shell(command, timeout=COMMAND_TIMEOUT)
        if done.timed_out:
            raise DeviceError(f"{self.spec}: {what} did not answer within {COMMAND_TIMEOUT:g} s")
        if done.returncode != 0:
            raise DeviceError(f"{self.spec}: {what} failed: {self._why(done)}")
        return done

    def _pull_result(self, remote: str, dest: Path, say: Callable[[str], None]) -> DeviceResult:
        """Pull ``remote``/result into a hidden staging folder, then move it to ``dest`` whole."""
        say(f"{self.spec}: pulling the result")
        with _staging(dest) as tmp:
            self.pull(f"{remote}/result", tmp / "result")
            return _install(tmp / "result", dest)

    def _why(self, done: Completed) -> str:
        return _last_line(done.stderr) or _last_line(done.stdout) or f"exit {done.returncode}"

    def run_job(
        self, job: Path, dest: Path, *, timeout: float, progress: Progress | None = None
    ) -> DeviceResult:
        remote = f"{self.workdir}/{uuid.uuid4().hex[:12]}"
        say = progress or (lambda _m: None)
        say(f"{self.spec}: pushing the job")
        self._quick(f"mkdir -p {shlex.quote(remote)}", "creating the job folder")
        try:
            with tempfile.TemporaryDirectory(prefix="tflkit-push-") as stage:
                bundle = Path(stage) / "bundle"
                shutil.copytree(job, bundle / "job")
                shutil.copy(harness_source(), bundle / "linux_harness.py")
                self.push(bundle, remote)
            q = shlex.quote
            command = (
                f"cd {q(remote)} && {q(self.python)} linux_harness.py run job result; "
                f"echo {_SENTINEL}$?"
            )
            done = self.shell(command, timeout=timeout, on_line=_harness_lines(self.spec, progress))
            _check_harness(self.spec, done, timeout, expect_sentinel=True)
            return self._pull_result(remote, dest, say)
        finally:
            # After Ctrl-C or SIGTERM the user is waiting: no cleanup (the harness on the device
            # stops by itself at its next heartbeat; its folder stays in the device's workdir).
            # Two cold CI runs took 45 s to exit after Ctrl-C; this 30 s cleanup, run in the
            # job's thread once the signal killed the adb session, was the one long wait.
            if not signal_received():
                with contextlib.suppress(DeviceError):
                    self.shell(f"rm -rf {shlex.quote(remote)}", timeout=30)


class SshDevice(ShellDevice):
    """``ssh:USER@HOST[:PORT]`` through the OpenSSH client (``~/.ssh/config`` applies)."""

    def __init__(
        self,
        destination: str,
        *,
        identity: Path | None = None,
        ssh_config: Path | None = None,
        python: str = "python3",
        workdir: str = "/tmp/tflkit-jobs",
    ) -> None:
        super().__init__(python, workdir)
        self.spec = f"ssh:{destination}"
        host, port = destination, None
        match = re.fullmatch(r"(.+):(\d+)", destination)
        if match:
            host, port = match[1], match[2]
        if not host or host.startswith("-"):
            raise UsageError(f"--device ssh:USER@HOST[:PORT], got {self.spec!r}")
        self.host = host
        args = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15"]
        args += ["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        if ssh_config is not None:
            args += ["-F", str(ssh_config)]
        if identity is not None:
            args += ["-i", str(identity), "-o", "IdentitiesOnly=yes"]
        if port:
            args += ["-p", port]
        self._ssh = args

    def describe(self) -> str:
        return f"{self.host} over ssh"

    def _remote(self, command: str) -> list[str]:
        return [*self._ssh, "--", self.host, command]

    def _check(self, done: Completed, what: str) -> None:
        if done.timed_out:
            raise DeviceError(f"{self.spec}: {what} did not finish within the time allowed")
        if done.returncode == 255:
            raise DeviceError(f"{self.spec}: ssh failed: {self._why(done)}")
        if done.returncode != 0:
            raise DeviceError(f"{self.spec}: {what} failed: {self._why(done)}")

    def shell(self, command: str, *, timeout: float, on_line: Progress | None = None) -> Completed:
        done = run_command(self._remote(command), timeout=timeout, on_line=on_line)
        if done.returncode == 255 and not done.timed_out:
            raise DeviceError(f"{self.spec}: ssh failed: {self._why(done)}")
        return done

    def push(self, local: Path, remote: str) -> None:
        with tempfile.TemporaryFile() as archive:
            with tarfile.open(fileobj=archive, mode="w") as tar:
                for child in sorted(local.iterdir()):
                    tar.add(child, arcname=child.name)
            archive.seek(0)
            done = run_command(
                self._remote(f"tar -C {shlex.quote(remote)} -xf -"),
                timeout=COMMAND_TIMEOUT,
                stdin=archive,
            )
        self._check(done, "pushing the job")

    def pull(self, remote: str, local: Path) -> None:
        with tempfile.TemporaryFile() as archive:
            done = run_command(
                self._remote(f"tar -C {shlex.quote(remote)} -cf - ."),
                timeout=COMMAND_TIMEOUT,
                stdout=archive,
            )
            self._check(done, "pulling the result")
            archive.seek(0)
            local.mkdir(parents=True)
            try:
                with tarfile.open(fileobj=archive, mode="r") as tar:
                    _safe_extract(tar, local)
            except (tarfile.TarError, OSError) as exc:
                raise DeviceError(f"{self.spec}: the result archive is damaged: {exc}") from None


def _safe_extract(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract regular files and folders that stay inside ``dest`` (a result is nothing else)."""
    for member in tar.getmembers():
        target = (dest / member.name).resolve()
        if not (member.isfile() or member.isdir()) or not target.is_relative_to(dest.resolve()):
            raise DeviceError(f"the result archive holds an unexpected entry {member.name!r}")
    extract_tar(tar, dest)  # every member was checked above


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
        picked = _last_line(done.stdout)
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
        say = progress or (lambda _m: None)
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
                    f"{base}{resume} {_ANDROID_RUNNER}; echo {_SENTINEL}$?", timeout=timeout
                )
                # am's exit status says little; the instrumentation result says the rest
                _check_harness(self.spec, run, timeout, expect_sentinel=True, any_status=True)
                if "Process crashed" not in run.stdout:
                    break
            failed = re.search(r"tflkit-error=(.*)", run.stdout)
            if failed or "tflkit-status=ok" not in run.stdout:
                detail = failed[1] if failed else _last_line(run.stdout)
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
