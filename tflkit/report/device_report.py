"""What ``tflkit device list|job|run`` show on a terminal (``device validate`` shows the validate
report, :func:`tflkit.report.validate_report.render_terminal`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from tflkit.delegates.base import RunResult
from tflkit.report.speed_report import render_speed

__all__ = ["render_device_list", "render_device_run", "render_job"]


def render_device_list(
    rows: Sequence[Mapping[str, Any]], config: str | os.PathLike[str], console: Console
) -> None:
    """One row per device (``device``, ``kind``, ``state``, ``detail``), then where to name
    more (``config``: the devices.toml)."""
    table = Table(show_edge=False)
    for col in ("device", "kind", "state", "detail"):
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(row["device"], row["kind"] or "-", row["state"], row["detail"])
    console.print(table)
    console.print(f"name devices (ssh boards, phones) in {config} to use them as --device NAME")


def render_job(path: Any, sets: Any, options: Any, console: Console) -> None:
    """The job folder written: its input sets (:class:`tflkit.validation.inputs.InputSets`) and
    backends (:class:`tflkit.delegates.device_protocol.JobOptions`), and how to run it."""
    console.print(
        f"{path}: {len(sets.feeds)} input sets ({sets.source}), backends "
        f"{', '.join(options.backends)}; run it with `tflkit device run {path} --device ...`"
    )


def render_device_run(
    devices: Sequence[Any], results: Sequence[Any], runners: Sequence[RunResult], console: Console
) -> bool:
    """One row per device x backend (status, ops on the accelerator), the result folders, then
    the speed split of every backend (``runners``: the results as :class:`RunResult`, the
    table ``validate`` shows). True when a backend did not finish ok."""
    table = Table(show_edge=False)
    for col in ("device", "backend", "status", "ops on accelerator"):
        table.add_column(col, overflow="fold")  # names fold, never cut to the same prefix
    failed = False
    for d, r in zip(devices, results, strict=True):
        for b in r.backends.values():
            rec = b.record
            ops = (
                f"{rec['ops_delegated']}/{rec['ops_total']}"
                if b.backend != "cpu"
                and rec.get("ops_total") is not None
                and rec.get("ops_delegated") is not None
                else "-"
            )
            status = b.status if b.status == "ok" else f"[red]{b.status}[/red]: {b.error or ''}"
            failed |= b.status != "ok"
            table.add_row(d.spec, b.backend, status, ops)
    console.print(table)
    render_speed(runners, console)
    console.print(f"results: {', '.join(str(r.path) for r in results)}")
    return failed
