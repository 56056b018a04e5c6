"""The plots of the HTML reports, drawn by matplotlib and returned as inline SVG markup.

Why matplotlib: it draws offline, writes static SVG that sits inside the page (text as paths, so
no font to load), and the reader's browser needs no JavaScript runtime to show it. matplotlib is
imported inside each function (through :func:`_figure`), never with this module, so ``tflkit
--help`` stays light.
"""

from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

__all__ = [
    "GPU_COLOUR",
    "bars",
    "error_along_graph",
    "error_histogram",
    "error_vs_value",
    "positions",
    "residency_strip",
    "svg",
]

GPU_COLOUR = "#2e7d32"
CPU_COLOURS = ("#c62828", "#ef6c00", "#6a1b9a", "#ad1457", "#5d4037", "#f9a825", "#455a64")
BLUE, ORANGE, GREY = "#1f5fa8", "#ef6c00", "#9e9e9e"
_WIDTH_IN = 11.0  # fits the 1180 px content column at 96 dpi once scaled by max-width:100%


def _figure(width: float, height: float) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.rcParams.update(
        {
            "svg.fonttype": "path",
            "svg.hashsalt": "tflkit",
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def svg(fig: Any) -> Markup:
    """The figure as an ``<svg>`` element (no XML prolog, no date), safe to place in a page.

    matplotlib's layout warnings (``UserWarning: constrained_layout not applied ...`` when many
    labels crowd a figure, seen on a terminal during ``validate --html``) stay off the terminal:
    the page is drawn anyway and the report is what the user reads."""
    buffer = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
    # inline in HTML the SVG and xlink namespaces are implied: no address left on the page
    text = text.replace(' xmlns="http://www.w3.org/2000/svg"', "")
    text = text.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "")
    return Markup(text)  # matplotlib's own SVG; it escapes the labels


def _finish(fig: Any, ax: Any, title: str, *, legend: bool = True) -> Markup:
    """Every plot's ending: the title (if any) top left, the legend right of the axes, the SVG."""
    if title:
        ax.set_title(title, loc="left", fontsize=9)
    if legend:
        ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return svg(fig)


def residency_strip(
    categories: Sequence[str],
    colours: dict[str, str],
    partitions: Sequence[tuple[int, int]] = (),
    boundaries: Sequence[tuple[int, int]] = (),
    title: str = "",
    label_of: Any = str,
) -> Markup:
    """Ops in execution order as one strip coloured by category (GPU, or the CPU reason), the
    delegated partitions under it, and the bytes copied at each boundary above it (``label_of``
    formats them)."""
    fig, ax = _figure(_WIDTH_IN, 2.1)
    n = len(categories)
    by_cat: dict[str, list[tuple[int, int]]] = {}
    for i, cat in enumerate(categories):
        spans = by_cat.setdefault(cat, [])
        if spans and spans[-1][0] + spans[-1][1] == i:
            spans[-1] = (spans[-1][0], spans[-1][1] + 1)
        else:
            spans.append((i, 1))
    for cat, spans in by_cat.items():
        ax.broken_barh(spans, (1.0, 1.0), facecolors=colours.get(cat, GREY), label=cat)
    if partitions:
        ax.broken_barh(
            [(a, b - a + 1) for a, b in partitions],
            (0.2, 0.5),
            facecolors=BLUE,
            label="GPU partition",
        )
    if boundaries:
        # the bytes copied at each CPU<->GPU boundary as stems above the strip, scaled to the
        # largest; the five largest labelled, apart from each other
        top = max(b for _, b in boundaries) or 1
        ax.vlines([p for p, _ in boundaries], 2.1, [2.1 + b / top for _, b in boundaries],
                  colors="#333", linewidth=1.0)  # fmt: skip
        labelled: list[int] = []
        for position, size in sorted(boundaries, key=lambda pb: -pb[1]):
            if len(labelled) == 5:
                break
            if any(abs(position - p) < max(n / 12, 1) for p in labelled):
                continue  # too close to a larger one's label
            labelled.append(position)
            ax.text(position, 2.1 + size / top + 0.03, label_of(size), fontsize=7, ha="center",
                    va="bottom")  # fmt: skip
    ax.set_xlim(0, max(n, 1))
    ax.set_ylim(0, 3.5)
    ax.set_yticks([0.45, 1.5, 2.6], ["partitions", "ops", "copies"])
    ax.set_xlabel("op index (execution order)")
    return _finish(fig, ax, title, legend=False)


def bars(
    groups: Sequence[str],
    series: dict[str, Sequence[float | None]],
    *,
    ylabel: str,
    log: bool = False,
    lines: dict[str, Sequence[float | None]] | None = None,
    title: str = "",
) -> Markup:
    """Grouped bars: one group per label, one bar per series; ``lines`` marks a value per group
    (a bound, a budget) as a short line across the group (see :func:`bar_figure`)."""
    fig, ax = bar_figure(groups, series, ylabel=ylabel, log=log, lines=lines)
    return _finish(fig, ax, title)


#: Groups an upright bar chart shows with readable labels at the page's width.
_UPRIGHT_GROUPS = 5
_PALETTE = (BLUE, ORANGE, GPU_COLOUR, "#6a1b9a", GREY)


def bar_figure(
    groups: Sequence[str],
    series: dict[str, Sequence[float | None]],
    *,
    ylabel: str,
    log: bool = False,
    lines: dict[str, Sequence[float | None]] | None = None,
) -> tuple[Any, Any]:
    """The figure and axes of :func:`bars`. Past :data:`_UPRIGHT_GROUPS` groups (nine runners,
    say) the bars lie down, one row per label (in full up to 48 characters), so no label
    overlaps another: upright, nine 28-character labels overlapped at the page's width."""
    count, upright = max(len(series), 1), len(groups) <= _UPRIGHT_GROUPS
    if upright:
        fig, ax = _figure(min(_WIDTH_IN, 2.5 + 0.9 * len(groups) * count), 2.6)
    else:
        fig, ax = _figure(_WIDTH_IN, 0.9 + 0.28 * len(groups) * (0.6 + 0.4 * count))
    width = 0.8 / count
    draw, mark = (ax.bar, ax.hlines) if upright else (ax.barh, ax.vlines)
    for k, (name, values) in enumerate(series.items()):
        at = [i + (k - (count - 1) / 2) * width for i in range(len(groups))]
        sizes = [_finite(v, log) for v in values]
        draw(at, sizes, width * 0.9, label=name, color=_PALETTE[k % len(_PALETTE)])
    for name, values in (lines or {}).items():
        for i, v in enumerate(values):
            value = _finite(v, log)
            if value:
                mark(value, i - 0.45, i + 0.45, colors="#c62828", linestyles="--",
                     label=name if i == 0 else None)  # fmt: skip
    if upright:
        if log:
            ax.set_yscale("log")
        ax.set_xticks(range(len(groups)), [_short(g) for g in groups], rotation=15, ha="right")
        ax.set_ylabel(ylabel)
    else:
        if log:
            ax.set_xscale("log")
        ax.set_yticks(range(len(groups)), [_short(g, 48) for g in groups])
        ax.invert_yaxis()  # the first group on top, as in the tables
        ax.set_xlabel(ylabel)
    return fig, ax


def positions(rows: dict[str, Sequence[int]], n_ops: int | None, *, xlabel: str) -> Markup:
    """One row per label (a rule) with a tick at each op index it applies to."""
    fig, ax = _figure(_WIDTH_IN, 0.8 + 0.3 * len(rows))
    labels = list(rows)
    ax.eventplot([list(rows[k]) for k in labels], colors=BLUE, linelengths=0.7, linewidths=2)
    ax.set_yticks(range(len(labels)), labels)
    if n_ops:
        ax.set_xlim(-0.5, n_ops - 0.5)
    ax.set_xlabel(xlabel)
    return svg(fig)


def error_vs_value(
    series: dict[str, tuple[Sequence[float], Sequence[float]]],
    bounds: dict[str, float | None],
    *,
    title: str,
) -> Markup:
    """Per comparison (``label -> (expected, actual)`` at sampled elements): |actual - expected|
    against the expected value (log scale; exact matches on the bottom line, labelled 0) and
    the comparison's bound in the same colour, dashed."""
    import numpy as np

    fig, ax = _figure(5.4, 2.4)
    palette = (BLUE, ORANGE, GPU_COLOUR, "#6a1b9a", "#c62828", GREY)
    floor = _floor(series, bounds)
    for k, (label, (expected, actual)) in enumerate(series.items()):
        e, a = np.asarray(expected, dtype=np.float64), np.asarray(actual, dtype=np.float64)
        keep = np.isfinite(e) & np.isfinite(a)
        diff = np.maximum(np.abs(a - e)[keep], floor)
        colour = palette[k % len(palette)]
        ax.scatter(e[keep], diff, s=5, color=colour, label=label, linewidths=0)
        bound = bounds.get(label)
        if bound and math.isfinite(bound):
            ax.axhline(bound, color=colour, linestyle="--", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylim(bottom=floor / 2)
    ticks = [floor] + [v for v in ax.get_yticks() if floor * 10 <= v]
    ax.set_yticks(ticks, ["0"] + [f"1e{round(math.log10(v))}" for v in ticks[1:]])
    ax.set_ylim(bottom=floor / 2)
    from matplotlib.ticker import MaxNLocator, NullLocator

    ax.yaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_locator(MaxNLocator(6))
    ax.set_xlabel("expected value")
    ax.set_ylabel("|actual - expected|")
    return _finish(fig, ax, title)


def _floor(
    series: dict[str, tuple[Sequence[float], Sequence[float]]], bounds: dict[str, float | None]
) -> float:
    """Where exact matches sit on the log axis: a decade under the smallest non-zero difference
    and no more than 5 decades under the smallest bound (at least 1e-12)."""
    import numpy as np

    smallest = math.inf
    for expected, actual in series.values():
        d = np.abs(np.asarray(actual, dtype=np.float64) - np.asarray(expected, dtype=np.float64))
        d = d[np.isfinite(d) & (d > 0)]
        if d.size:
            smallest = min(smallest, float(d.min()))
    finite = [b for b in bounds.values() if b and math.isfinite(b)]
    if finite:
        smallest = max(smallest if math.isfinite(smallest) else 0.0, min(finite) * 1e-5)
    if not math.isfinite(smallest) or smallest <= 0:
        smallest = 1e-6
    return max(10.0 ** math.floor(math.log10(smallest) - 1), 1e-12)


def error_histogram(
    edges_log10: Sequence[float],
    counts: Sequence[int],
    zeros: int,
    bound: float | None,
    *,
    title: str,
) -> Markup:
    """|actual - expected| per element in log10 bins, the exact zeros as their own bar, and the
    bound the verdict uses as a red line."""
    fig, ax = _figure(5.4, 2.2)
    lefts = [10.0**e for e in edges_log10[:-1]]
    widths = [10.0 ** edges_log10[i + 1] - lefts[i] for i in range(len(lefts))]
    ax.bar(lefts, list(counts), widths, align="edge", color=BLUE, label="elements")
    ax.set_xscale("log")
    if zeros and lefts:
        ax.bar([lefts[0] / 10], [zeros], [lefts[0] * 0.9], align="edge", color=GREY,
               label=f"exactly 0 ({zeros})")  # fmt: skip
    if bound and bound > 0 and math.isfinite(bound):
        ax.axvline(bound, color="#c62828", linestyle="--", label="bound")
    ax.set_yscale("symlog")
    ax.set_xlabel("|difference| per element")
    ax.set_ylabel("elements")
    return _finish(fig, ax, title)


def error_along_graph(
    op_indices: Sequence[int],
    isolated: Sequence[float | None],
    accumulated: Sequence[float | None],
    threshold: float,
    *,
    first: int | None,
    culprits: Sequence[int],
) -> Markup:
    """Per op in execution order: the error it makes alone (bars) and the error that has
    accumulated by its output (line), as a share of its peak; threshold, first divergent op and
    the culprits marked."""
    fig, ax = _figure(_WIDTH_IN, 2.8)
    floor = 1e-9
    iso = [max(min(v, 1.0), floor) if v is not None and math.isfinite(v) else
           (1.0 if v is not None else floor) for v in isolated]  # fmt: skip
    colours = ["#c62828" if i in set(culprits) else BLUE for i in op_indices]
    ax.bar(op_indices, iso, 0.8, color=colours, label="isolated")
    acc = [(i, max(min(v, 1.0), floor)) for i, v in zip(op_indices, accumulated, strict=True)
           if v is not None and not math.isnan(v)]  # fmt: skip
    if acc:
        ax.plot([a for a, _ in acc], [b for _, b in acc], color=ORANGE, label="accumulated")
    ax.axhline(threshold, color="#c62828", linestyle="--", linewidth=0.8, label="threshold")
    if first is not None:
        ax.axvline(first, color="#333", linestyle=":", label=f"first divergent #{first}")
    ax.set_yscale("log")
    ax.set_ylim(floor, 2)
    ax.set_xlabel("op index (execution order)")
    ax.set_ylabel("error / op peak")
    ax.legend(fontsize=7, frameon=False, ncols=4, loc="upper left")
    return svg(fig)


def _finite(value: float | None, log: bool) -> float:
    if value is None or not math.isfinite(value):
        return math.nan if log else 0.0
    if log and value <= 0:
        return math.nan  # no bar: zero has no place on a log axis (the table says 0)
    return value


def _short(label: str, width: int = 28) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"
