"""``tflkit doctor`` on the terminal: one table (group, piece, state, what was found), then the
command for each missing piece."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["render_terminal"]

_COLOURS = {"ok": "green", "missing": "yellow", "failed": "red", "info": "dim"}


def render_terminal(report: Any, console: Console) -> None:
    """``report``: a :class:`tflkit.doctor.items.DoctorReport`."""
    table = Table(show_edge=False, box=None, pad_edge=False, show_header=False)
    for _ in range(4):
        table.add_column()
    last = None
    for item in report.items:
        colour = _COLOURS[item.state]
        table.add_row(
            item.group if item.group != last else "",
            escape(item.name),
            f"[{colour}]{item.state}[/{colour}]",
            escape(item.detail),
        )
        last = item.group
    console.print(table)
    fixes = [i for i in report.items if i.fix and i.state in ("missing", "failed")]
    if fixes:
        console.print("to bring what is missing:")
    for item in fixes:
        console.print(f"  {escape(item.name)}: {escape(item.fix)}", highlight=False)
    verdict = "works here" if report.gpu_ok else "does not work here"
    console.print(f"GPU accelerator {verdict}")
