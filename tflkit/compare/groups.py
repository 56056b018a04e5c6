"""Channel groups: the parts of one output that mean different things, each judged at its own scale.

A YOLO-style detector writes boxes and class scores into one tensor: nudenet 3.4.2's
``[1, 22, 2100]`` holds four rows of box pixels (3 to 316) and 18 rows of class scores (at most
0.82). One bound for the whole output is set by the pixels (11.9 in fp16), so a score could move
from 0.8 to 0 unseen. Splitting the channel axis into groups, each with its own noise and
resolution, checks the scores at the scale of scores.

Groups come from the user (``--output-groups``) or from the reference values
(:func:`detect_groups`): channels whose values all lie in [0, 1] (scores, probabilities) form
one group per contiguous run, other channels split where neighbouring magnitudes differ by at
least :data:`SPLIT_RATIO`; then neighbouring groups whose magnitudes differ by less than that are
merged again, so an output is only split where one part sits two orders of magnitude below
another. Nothing here knows about runners.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tflkit.errors import UsageError
from tflkit.jsonable import plain_fields

__all__ = [
    "MAX_CHANNELS",
    "SPLIT_RATIO",
    "ChannelGroup",
    "channel_axis",
    "detect_groups",
    "parse_output_groups",
]

#: neighbouring channel groups are judged apart when their peaks differ by at least this factor
#: (two orders of magnitude). Measured (``PYTHONPATH=. python bench/output_groups.py``): channels
#: of one meaning differ by up to 5.7x on the corpus (deeplabv3's class logits, random inputs),
#: nudenet's box pixels and class scores by 386x (photographs) to 10,000x (random inputs)
SPLIT_RATIO = 100.0
#: the channel axis is the shortest non-batch axis with 3 to this many entries whose other axes
#: hold at least 4 times as many positions (boxes x anchors, not classes x one row)
MAX_CHANNELS = 1024


@dataclass(frozen=True)
class ChannelGroup:
    """Channels ``start:stop`` of axis ``axis`` of an output (axes of the output's own shape).

    ``label``: "boxes"-like names from the user, else what the values look like ("unit": all
    in [0, 1]; "values": the rest); ``source``: "data" or "user"."""

    label: str
    axis: int
    start: int
    stop: int
    source: str = "data"

    @property
    def channels(self) -> str:
        return f"{self.start}:{self.stop}"

    def take(self, stacked: np.ndarray) -> np.ndarray:
        """This group's slice of an array stacked over input sets (axis 0 is the set)."""
        index = [slice(None)] * stacked.ndim
        index[self.axis + 1] = slice(self.start, self.stop)
        return stacked[tuple(index)]

    def to_json(self) -> dict[str, Any]:
        return {**plain_fields(self), "channels": self.channels}


def channel_axis(shape: Sequence[int]) -> int | None:
    """The axis a detector lists its channels on, or None (see :data:`MAX_CHANNELS`)."""
    total = int(np.prod(shape)) if len(shape) else 0
    best = None
    for axis, size in enumerate(shape):
        if axis == 0 and size == 1 and len(shape) > 1:
            continue  # the batch
        if not 3 <= size <= MAX_CHANNELS or total // size < 4 * size:
            continue
        if best is None or size < shape[best]:
            best = axis
    return best


def detect_groups(values: np.ndarray, shape: Sequence[int]) -> tuple[ChannelGroup, ...]:
    """Channel groups of an output from its reference values (stacked over input sets), or ()
    when the output has one scale (most outputs)."""
    axis = channel_axis(shape)
    if axis is None or values.ndim != len(shape) + 1 or values.dtype.kind not in "fiu":
        return ()
    moved = np.moveaxis(values.astype(np.float64), axis + 1, 0).reshape(shape[axis], -1)
    finite = np.where(np.isfinite(moved), moved, np.nan)
    with np.errstate(all="ignore"):
        peak = np.nan_to_num(np.nanmax(np.abs(finite), axis=1))
        low = np.nan_to_num(np.nanmin(finite, axis=1))
        high = np.nan_to_num(np.nanmax(finite, axis=1))
    unit = (low >= 0.0) & (high <= 1.0)
    runs: list[list[int]] = [[0]]
    for c in range(1, shape[axis]):
        last = runs[-1][-1]
        split = unit[c] != unit[last] or (not unit[c] and _apart(peak[c], peak[last]))
        if split:
            runs.append([c])
        else:
            runs[-1].append(c)
    merged: list[list[int]] = []
    for run in runs:  # neighbours within an order of magnitude are one scale
        if merged and not _apart(peak[merged[-1]].max(), peak[run].max()):
            merged[-1].extend(run)
        else:
            merged.append(list(run))
    if len(merged) < 2:
        return ()
    return tuple(
        ChannelGroup("unit" if unit[run].all() else "values", axis, run[0], run[-1] + 1)
        for run in merged
    )


def _apart(a: float, b: float) -> bool:
    small, large = sorted((abs(float(a)), abs(float(b))))
    return large > 0 and (small == 0 or large / small >= SPLIT_RATIO)


_SPEC = re.compile(r"^(?P<name>.+?)(?:@(?P<axis>-?\d+))?=(?P<body>.+)$")
_PART = re.compile(r"^(?:(?P<label>[A-Za-z_][\w-]*):)?(?P<start>\d+):(?P<stop>\d+)$")
USAGE = (
    "expected OUTPUT[@AXIS]=[LABEL:]START:STOP,... covering the axis, e.g. "
    "output0=boxes:0:4,scores:4:22, or OUTPUT=none"
)


def parse_output_groups(items: Sequence[str]) -> dict[str, tuple[ChannelGroup, ...]]:
    """``["output0=boxes:0:4,scores:4:22", "x@2=0:4,4:10", "y=none"]`` -> groups by output name.

    The axis is checked against the output's shape later (:func:`fit_groups`); ``none`` judges
    the output as one piece (no groups detected)."""
    found: dict[str, tuple[ChannelGroup, ...]] = {}
    for item in items:
        spec = _SPEC.match(item.strip())
        if spec is None:
            raise UsageError(f"--output-groups {item!r}: {USAGE}")
        name, body = spec["name"], spec["body"].strip()
        axis = int(spec["axis"]) if spec["axis"] is not None else -1
        if body.lower() == "none":
            found[name] = ()
            continue
        groups = []
        for number, part in enumerate(p.strip() for p in body.split(",")):
            match = _PART.match(part)
            if match is None:
                raise UsageError(f"--output-groups {item!r}: {part!r} is not [LABEL:]START:STOP")
            start, stop = int(match["start"]), int(match["stop"])
            expected_start = groups[-1].stop if groups else 0
            if stop <= start or start != expected_start:
                raise UsageError(
                    f"--output-groups {item!r}: groups must be contiguous from 0 with "
                    f"START < STOP (got {start}:{stop} after {expected_start})"
                )
            groups.append(ChannelGroup(match["label"] or f"g{number}", axis, start, stop, "user"))
        found[name] = tuple(groups)
    return found


def fit_groups(
    name: str, shape: Sequence[int], groups: tuple[ChannelGroup, ...]
) -> tuple[ChannelGroup, ...]:
    """User groups placed on an output's axis (the one they cover when no axis was given)."""
    if not groups:
        return ()
    stop = groups[-1].stop
    axis = groups[0].axis
    if axis == -1 and not any(g.axis != -1 for g in groups):
        axes = [a for a, size in enumerate(shape) if size == stop]
        if not axes:
            raise UsageError(
                f"--output-groups {name}: no axis of shape {list(shape)} has {stop} entries"
            )
        axis = axes[-1] if len(axes) > 1 and shape[axes[-1]] == stop else axes[0]
    if not 0 <= axis < len(shape) or shape[axis] != stop:
        raise UsageError(
            f"--output-groups {name}: the groups cover {stop} channels, axis {axis} of "
            f"{list(shape)} has {shape[axis] if 0 <= axis < len(shape) else 'none'}"
        )
    return tuple(ChannelGroup(g.label, axis, g.start, g.stop, "user") for g in groups)
