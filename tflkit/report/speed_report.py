"""Speed, per device and backend: the part of the ``validate`` report that says whether the GPU is
worth it where the model ran.

Each runner's :attr:`~tflkit.delegates.base.RunResult.speed` (compile, first inference, p50 and
p90 of the steady-state runs) is grouped by device (:func:`~tflkit.delegates.base.device_of`;
this machine's runners are the ``host``) and set against the same device's CPU path, the
registry's ``baseline`` (``cpu``: XNNPACK natively; ``wasm``: LiteRT.js's XNNPACK in a browser):
the GPU's speed-up is the CPU path's p50 over the GPU's. On
a software GPU (lavapipe, SwiftShader) the figures are labelled as such: they measure the CPU
that emulates the GPU, not a GPU. Several devices give a fleet table (devices x backends).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from tflkit.delegates.base import RunResult, device_of, runner_spec

__all__ = ["HOST", "device_facts", "render_speed", "speed_json", "speed_rows"]

#: The device name of the runners that ran on this machine (no ``@DEVICE`` in their name).
HOST = "host"


def _device(r: RunResult) -> str:
    return device_of(r.runner) or HOST


def _backend(r: RunResult) -> str:
    """The runner's name on its device (``gpu-fp16`` of ``gpu-fp16@adb:SERIAL``)."""
    device = device_of(r.runner)
    return r.runner.removesuffix(f"@{device}") if device else r.runner


def _software(r: RunResult) -> bool:
    return bool((r.executed.get("adapter") or {}).get("software"))


def speed_rows(runners: Sequence[RunResult]) -> list[dict[str, Any]]:
    """One row per runner: device, backend, the speed split, and the speed-up over the same
    device's CPU path (the registry's ``baseline``; None when either has no steady state)."""
    p50 = {(_device(r), _backend(r)): r.speed.p50_s for r in runners}
    rows = []
    for r in runners:
        spec = runner_spec(r.runner)
        if spec is not None and spec.device == "framework":
            continue  # the reference's times are the framework's, not a device's
        device, speed = _device(r), r.speed
        base = p50.get((device, spec.baseline)) if spec and spec.baseline else None
        rows.append(
            {
                "runner": r.runner,
                "device": device,
                "backend": _backend(r),
                "status": r.status,
                "software_gpu": _software(r),
                "compile_s": speed.compile_s,
                "first_s": speed.first_s,
                "p50_s": speed.p50_s,
                "p90_s": speed.p90_s,
                "runs": speed.runs,
                "warmup_runs": speed.warmup_runs,
                "gpu_speedup": base / speed.p50_s if base and speed.p50_s else None,
            }
        )
    return rows


def device_facts(runners: Sequence[RunResult]) -> list[dict[str, Any]]:
    """Which phone (or browser, or board) each device is: its browser and user agent, its GPU
    adapter's vendor and architecture, the WebDriver server it came through."""
    facts: dict[str, dict[str, Any]] = {}
    for r in runners:
        device = _device(r)
        if device == HOST:
            continue
        info = r.executed.get("device_info") or {}
        entry = facts.setdefault(device, {"device": device})
        adapter = r.executed.get("adapter") or {}
        webgpu = info.get("webgpu") or {}
        for key, value in (
            ("browser", info.get("browser")),
            ("user_agent", info.get("user_agent")),
            ("os", info.get("os") if not info.get("user_agent") else None),
            ("machine", info.get("machine")),
            ("webdriver", (info.get("webdriver") or {}).get("url")),
            ("gpu_vendor", adapter.get("vendor") or webgpu.get("vendor")),
            ("gpu_architecture", adapter.get("architecture") or webgpu.get("architecture")),
            ("gpu", adapter.get("name")),
            ("software_gpu", adapter.get("software") if adapter else None),
        ):
            if value not in (None, "") and entry.get(key) in (None, ""):
                entry[key] = value
    return [entry for entry in facts.values() if len(entry) > 1]  # devices that said something


def speed_json(runners: Sequence[RunResult]) -> dict[str, Any]:
    """The ``speed`` section of the validate JSON: rows, devices, and the fleet table."""
    rows = speed_rows(runners)
    return {"rows": rows, "devices": device_facts(runners), "fleet": _fleet(rows)}


def _fleet(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Devices x backends (p50 and speed-up) when several devices ran, else None."""
    devices = list(dict.fromkeys(r["device"] for r in rows if r["device"] != HOST))
    if len(devices) < 2:
        return None
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    cells = {(r["device"], r["backend"]): r for r in rows}
    table = []
    for device in [HOST, *devices]:
        line = {}
        for backend in backends:
            row = cells.get((device, backend))
            if row is not None:
                line[backend] = {k: row[k] for k in ("p50_s", "gpu_speedup", "status")}
        if line:
            table.append({"device": device, "backends": line})
    return {"backends": backends, "rows": table}


def _s(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1e-3:
        return f"{value * 1e6:.0f} us"
    if value < 1:
        return f"{value * 1e3:.3g} ms"
    return f"{value:.3g} s"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}x"


def render_speed(runners: Sequence[RunResult], console: Console) -> None:
    """The speed table (per runner), the devices it ran on, and the fleet table."""
    rows = speed_rows(runners)
    if not any(r["p50_s"] or r["first_s"] for r in rows):
        return
    table = Table(title="speed", show_edge=False)
    # a runner's name folds onto a second line rather than losing its end: at 80 columns two
    # WebDriver devices both showed as "webgpu-fp32@w..."
    table.add_column("runner", overflow="fold")
    for col in ("compile", "first", "p50", "p90", "runs", "GPU speed-up"):
        table.add_column(col)
    for row in rows:
        if row["status"] != "ok":
            continue  # its error is in the runners' lines
        gain = _x(row["gpu_speedup"])
        if row["software_gpu"] and row["gpu_speedup"] is not None:
            gain += " (software GPU)"
        table.add_row(
            row["runner"],
            _s(row["compile_s"]),
            _s(row["first_s"]),
            _s(row["p50_s"]),
            _s(row["p90_s"]),
            str(row["runs"]),
            gain,
        )
    console.print(table)
    if any(r["software_gpu"] for r in rows):
        console.print(
            "  software GPU: its figures time the CPU that emulates the GPU, not a phone's GPU"
        )
    for facts in device_facts(runners):
        gpu = " ".join(str(facts.get(k) or "") for k in ("gpu_vendor", "gpu_architecture"))
        what = facts.get("user_agent") or facts.get("os") or "-"
        console.print(
            f"  {facts['device']}: {facts.get('browser') or ''} {what}; GPU "
            f"{gpu.strip() or facts.get('gpu') or 'not seen'}"
            + (" (software)" if facts.get("software_gpu") else "")
        )
    fleet = _fleet(rows)
    if fleet is not None:
        _render_fleet(fleet, console)


def _render_fleet(fleet: dict[str, Any], console: Console) -> None:
    table = Table(title="fleet: p50 (GPU speed-up over the device's CPU path)", show_edge=False)
    table.add_column("device", overflow="fold")
    for backend in fleet["backends"]:
        table.add_column(backend)
    for line in fleet["rows"]:
        cells = []
        for backend in fleet["backends"]:
            cell = line["backends"].get(backend)
            if cell is None:
                cells.append("")
            elif cell["status"] != "ok":
                cells.append(f"[red]{cell['status']}[/red]")
            else:
                gain = f" ({_x(cell['gpu_speedup'])})" if cell["gpu_speedup"] else ""
                cells.append(_s(cell["p50_s"]) + gain)
        table.add_row(line["device"], *cells)
    console.print(table)
