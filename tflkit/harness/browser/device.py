"""``--device browser[:ADAPTER]``: this machine's headless Chromium with LiteRT.js, as a device.

The device runs a job folder with :func:`~tflkit.delegates.browser.job.run_browser_job` and writes
the same result folder the Linux and Android harnesses write (harness kind ``browser``), so
``device run`` and ``device validate`` treat it like any other device. Its backends are
``webgpu_fp32``, ``webgpu_fp16`` and ``wasm`` (all three by default); a job naming ``cpu`` or
``gpu_*`` gets ``unavailable`` records for them.

Adapters (``tflkit.delegates.browser.chromium.ADAPTERS``): ``swiftshader`` (the default: Chromium's
own software Vulkan, core WebGPU, needs nothing but Chromium) and ``lavapipe`` (Mesa's software
Vulkan through ANGLE, WebGPU compatibility mode: needs Mesa >= 25, the path phones without
core WebGPU take).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tflkit.delegates.browser.chromium import ADAPTERS
from tflkit.delegates.browser.errors import BrowserHarnessError
from tflkit.delegates.device_protocol import (
    BROWSER_BACKENDS,
    DeviceResult,
    ProtocolError,
    read_result,
)
from tflkit.errors import UsageError, require_extra
from tflkit.harness.device_spec import parse_device
from tflkit.harness.transport import Device, DeviceError
from tflkit.report.progress import Progress, quiet

__all__ = [
    "DEFAULT_ADAPTER",
    "BrowserDevice",
    "StagedBrowserDevice",
    "device_from_spec",
    "parse_browser_spec",
]

#: ``--device browser`` alone: SwiftShader, which every Chromium has (lavapipe needs Mesa >= 25).
DEFAULT_ADAPTER = "swiftshader"


def parse_browser_spec(spec: str) -> str:
    """The adapter of ``browser`` or ``browser:ADAPTER``; a usage error for anything else."""
    scheme, sep, adapter = spec.partition(":")
    if scheme != "browser" or (sep and adapter not in ADAPTERS):
        raise UsageError(
            f"--device browser[:{'|'.join(ADAPTERS)}] (this machine's headless Chromium), "
            f"got {spec!r}"
        )
    return adapter or DEFAULT_ADAPTER


def device_from_spec(spec: str, **kwargs: object) -> Device:
    """``browser[:ADAPTER]`` here, every other spec through :func:`device_spec.parse_device`
    (``kwargs``: its identity, ssh_config, python)."""
    if spec == "browser" or spec.startswith("browser:"):
        return BrowserDevice.from_spec(spec)
    if ":" not in spec and spec != "local":  # a name from devices.toml may mean a browser
        from tflkit.harness.config import configured_devices

        target = str((configured_devices().get(spec) or {}).get("device", ""))
        if target == "browser" or target.startswith("browser:"):
            return BrowserDevice.from_spec(target)
    return parse_device(spec, **kwargs)  # type: ignore[arg-type]


class StagedBrowserDevice(Device):
    """What every browser device (this machine's Chromium, an adb device's browser, any browser
    at a URL) shares: LiteRT.js's backends, and a job run staged beside its result folder."""

    kind = "browser"
    #: the protocol backends this device runs (``device validate``'s default for it)
    backends = BROWSER_BACKENDS
    #: where LiteRT.js is cached (None: the default cache)
    cache_dir: Path | None
    #: the WebGPU adapter (``chromium.ADAPTERS``) the page asks for
    adapter: str

    def run_staged(
        self,
        job: Path,
        dest: Path,
        *,
        timeout: float,
        progress: Progress | None,
        finish: Callable[[Path], None] | None = None,
        hint: str = "",
        **kwargs: Any,
    ) -> DeviceResult:
        """``run_browser_job`` into a hidden sibling of ``dest``, renamed into place when
        complete; its errors become one :class:`DeviceError` line.

        ``finish`` edits the complete result folder before it moves into place (e.g. to say
        which browser ran the page); ``hint`` is added to the error line."""
        from tflkit.delegates.browser.job import run_browser_job

        spec = self.spec
        if dest.exists():
            raise UsageError(f"{dest} already exists; refusing to overwrite it")
        say = progress or quiet
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}-partial-"))
        try:
            run_browser_job(
                job,
                staging / "result",
                timeout=timeout,
                progress=lambda line: say(f"{spec}: {line.removeprefix('browser: ')}"),
                adapter=self.adapter,
                cache_dir=self.cache_dir,
                **kwargs,
            )
            if finish is not None:
                finish(staging / "result")
            read_result(staging / "result")
            (staging / "result").rename(dest)
        except ProtocolError as exc:
            raise DeviceError(f"{spec}: the browser harness refused the job: {exc}") from None
        except BrowserHarnessError as exc:
            raise DeviceError(f"{spec}: {exc}{hint}") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return read_result(dest)


class BrowserDevice(StagedBrowserDevice):
    """This machine's headless Chromium running LiteRT.js on one WebGPU adapter."""

    def __init__(
        self,
        adapter: str = DEFAULT_ADAPTER,
        *,
        cache_dir: Path | None = None,
        chromium: str | None = None,
    ) -> None:
        if adapter not in ADAPTERS:
            raise UsageError(f"unknown WebGPU adapter {adapter!r}; known: {', '.join(ADAPTERS)}")
        self.adapter = adapter
        self.spec = "browser" if adapter == DEFAULT_ADAPTER else f"browser:{adapter}"
        self.cache_dir = cache_dir
        self.chromium = chromium

    @classmethod
    def from_spec(cls, spec: str, **kwargs: object) -> BrowserDevice:
        """The device ``spec`` names; a missing ``browser`` extra stops here, before any job."""
        require_extra("browser", f"--device {spec} (Chromium driven by Playwright)", "playwright")
        device = cls(parse_browser_spec(spec), **kwargs)  # type: ignore[arg-type]
        device.spec = spec  # as the user typed it: runner names carry it
        return device

    def describe(self) -> str:
        note = ADAPTERS[self.adapter].note
        return f"headless Chromium with LiteRT.js, WebGPU adapter {self.adapter} ({note})"

    def run_job(
        self, job: Path, dest: Path, *, timeout: float, progress: Progress | None = None
    ) -> DeviceResult:
        """Run ``job`` in Chromium; the result folder appears at ``dest`` whole or not at all."""
        from tflkit.delegates.browser.chromium import CHROMIUM

        return self.run_staged(
            job,
            dest,
            timeout=timeout,
            progress=progress,
            chromium=self.chromium or CHROMIUM,
        )
