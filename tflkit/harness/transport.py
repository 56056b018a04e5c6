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
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tflkit.delegates.device_protocol import DeviceResult, ProtocolError, read_result
from tflkit.errors import TflkitError, UsageError
from tflkit.fsio import extract_tar
from tflkit.proc.interrupts import signal_received
from tflkit.proc.worker import own_session
from tflkit.report.progress import Progress, quiet

__all__ = [
    "Device",
    "DeviceError",
    "LocalDevice",
    "SshDevice",
    "harness_source",
]

#: Printed by the remote shell after the harness exits; without it the connection dropped.
HARNESS_SENTINEL = "tflkit-harness-exit:"
#: Seconds for the quick commands (mkdir, push, pull, getprop); the run itself gets the job's.
COMMAND_TIMEOUT = 120.0


def harness_source() -> Path:
    """The Linux harness file pushed with each job (``linux_harness.py``, next to this module)."""
    return Path(__file__).with_name("linux_harness.py")


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


def last_line(text: str) -> str:
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

    def __init__(self, python: str | None = None, spec: str = "local") -> None:
        self.spec = spec  # "runtime:DIST==VERSION" for a runtime venv (``--runtime``)
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
            check_harness(self.spec, done, timeout, expect_sentinel=False)
            return _install(out, dest)


def _harness_lines(spec: str, progress: Progress | None) -> Progress:
    def on_line(line: str) -> None:
        if progress is not None and line.startswith("tflkit-harness: ") and "running (" not in line:
            progress(f"{spec}: {line.removeprefix('tflkit-harness: ')}")

    return on_line


def check_harness(
    spec: str, done: Completed, timeout: float, *, expect_sentinel: bool, any_status: bool = False
) -> None:
    if done.timed_out:
        raise DeviceError(f"{spec}: the job did not finish within {timeout:g} s (stopped)")
    code: int | None = done.returncode
    if expect_sentinel:
        match = re.search(rf"^{HARNESS_SENTINEL}(\d+)\s*$", done.stdout, re.MULTILINE)
        if match is None:
            why = last_line(done.stderr) or "the connection closed before the harness finished"
            raise DeviceError(f"{spec}: the device disconnected during the job ({why})")
        code = int(match[1])
    if code == 0 or any_status:
        return
    detail = last_line(done.stderr) or last_line(done.stdout) or f"exit status {code}"
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
        return last_line(done.stderr) or last_line(done.stdout) or f"exit {done.returncode}"

    def run_job(
        self, job: Path, dest: Path, *, timeout: float, progress: Progress | None = None
    ) -> DeviceResult:
        remote = f"{self.workdir}/{uuid.uuid4().hex[:12]}"
        say = progress or quiet
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
                f"echo {HARNESS_SENTINEL}$?"
            )
            done = self.shell(command, timeout=timeout, on_line=_harness_lines(self.spec, progress))
            check_harness(self.spec, done, timeout, expect_sentinel=True)
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
