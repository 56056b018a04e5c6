"""How much memory ``validate`` may use, and whether the model fits at its input shapes.

Before any runner starts, :func:`fit_input_sets` sets a budget (``--memory-budget``, else
:data:`FRACTION` of the memory this machine has available: ``MemAvailable``, capped by a
cgroup's limit) and, unless the model's every tensor at its stored shapes is clearly small,
runs one CPU inference at the input sets' shapes in a child (:mod:`tflkit.proc._memory_worker`)
whose resident set is watched and killed at the budget. The child's peak minus its size before
loading the model is the memory one interpreter needs; ``validate`` holds a few at a time
(:data:`INTERPRETERS`: the in-process CPU runner, the noise calibration's, a GPU child) and every
input set's inputs and outputs for each runner. A model that does not fit is one line and exit 2
(:class:`OverBudget`), never an OOM kill; the input sets are cut to what fits, with a note.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tflkit import ir
from tflkit.errors import UsageError
from tflkit.ir.entry import IoSpec, entry_point
from tflkit.ir.shapes import by_feed_name
from tflkit.proc import _memory_worker
from tflkit.proc.worker import kill_group, own_session, python_command
from tflkit.validation.inputs.specs import resolve_specs

if TYPE_CHECKING:
    from tflkit.validation.options import InputSetOptions

__all__ = [
    "FRACTION",
    "INTERPRETERS",
    "OverBudget",
    "available_bytes",
    "fit_input_sets",
    "input_specs",
    "measure_inference",
    "parse_size",
]

#: the share of the available memory validate budgets for itself (others run on this machine)
FRACTION = 0.75
#: interpreters alive at once, at most: the in-process CPU runner, the noise calibration's
#: perturbed runs, a GPU runner's child
INTERPRETERS = 3
#: below this share of the budget, the model's tensors at their stored shapes need no trial run
_SMALL = 0.05
_POLL_S = 0.02
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


class OverBudget(UsageError):
    """The model cannot run within the memory budget at these input shapes (exit 2)."""


def parse_size(text: str) -> int:
    """``"4G"``, ``"512M"``, ``"2.5GiB"``, ``"1000000"`` -> bytes."""
    found = _SIZE.match(text)
    if found is None:
        raise UsageError(f"--memory-budget takes a size such as 4G or 512M, got {text!r}")
    power = " kmgt".index(found.group(2).lower() or " ")
    return int(float(found.group(1)) * 1024**power)


def available_bytes() -> int:
    """Memory this process may still take: ``MemAvailable``, capped by a cgroup v2 limit."""
    found = re.search(r"^MemAvailable:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
    available = int(found.group(1)) * 1024 if found else 8 * 1024**3
    group = Path("/sys/fs/cgroup")
    try:
        limit = (group / "memory.max").read_text().strip()
        if limit != "max":
            used = int((group / "memory.current").read_text())
            available = min(available, int(limit) - used)
    except (OSError, ValueError):
        pass
    return max(available, 0)


def _gib(n: float) -> str:
    return f"{n / 1024**3:.2f} GB" if n >= 1024**3 else f"{n / 1024**2:.0f} MB"


def _static_bytes(model: ir.Model) -> int:
    """Every tensor of every subgraph at its stored shape (weights and activations)."""
    total = 0
    for graph in model.subgraphs:
        for t in graph.tensors:
            if t.dtype is not None and t.shape:
                total += int(np.prod(t.shape, dtype=np.int64)) * np.dtype(t.dtype).itemsize
    return total


def measure_inference(
    data: bytes,
    shapes: dict[str, list[int]],
    signature: str | None,
    budget: int,
    timeout: float,
) -> tuple[int | None, str]:
    """One CPU inference at ``shapes`` in a child killed past ``budget`` bytes: the bytes it
    needed beyond the runtime itself (None when it went over the budget), and what happened."""
    with tempfile.TemporaryDirectory(prefix="tflkit-memory-") as tmp:
        model, shape_file = Path(tmp) / "model.tflite", Path(tmp) / "shapes.json"
        model.write_bytes(data)
        shape_file.write_text(json.dumps(shapes))
        named = [signature] if signature else []
        cmd = python_command(_memory_worker.main, model, shape_file, *named)
        with own_session(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        ) as proc:
            over = _watch(proc, budget, timeout)
            out = proc.stdout.read().decode("utf-8", "replace") if proc.stdout else ""
    if over:
        return None, over
    kb = dict(re.findall(r"^(base_kb|peak_kb): (\d+)", out, re.M))
    if "peak_kb" not in kb:
        return 0, f"the measuring run ended without a figure (exit {proc.returncode})"
    need = (int(kb["peak_kb"]) - int(kb.get("base_kb", 0))) * 1024
    error = re.search(r"^error: (.*)$", out, re.M)
    return max(need, 0), error.group(1) if error else "ok"


def _watch(proc: subprocess.Popen, budget: int, timeout: float) -> str:
    """Wait for ``proc``, killing it when its resident set passes ``budget`` or it outlives
    ``timeout``; the reason it was killed, "" when it ended on its own."""
    start = time.monotonic()
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            found = re.search(r"^VmRSS:\s+(\d+) kB", status.read_text(), re.M)
        except OSError:
            found = None
        if found and int(found.group(1)) * 1024 > budget:
            kill_group(proc.pid)
            proc.wait()
            return f"its resident memory passed {_gib(budget)}"
        if time.monotonic() - start > timeout:
            kill_group(proc.pid)
            proc.wait()
            return f"it ran longer than {timeout:g} s"
        time.sleep(_POLL_S)
    return ""


def input_specs(model: ir.Model, options: InputSetOptions) -> list[IoSpec]:
    """The entry point's inputs at the shapes the input sets will have (no data made)."""
    _, _, inputs, _ = entry_point(model, options.signature)
    shapes = by_feed_name(model, options.input_shapes, options.signature)
    return resolve_specs(inputs, shapes, [])


def fit_input_sets(
    data: bytes,
    model: ir.Model,
    specs: Sequence[IoSpec],
    count: int,
    *,
    signature: str | None,
    runners: int,
    budget: int | None = None,
    timeout: float = 300.0,
    say: Callable[[str], None] = lambda line: None,
) -> tuple[int, list[str]]:
    """How many input sets fit in the budget (at most ``count``), and the notes that say so;
    :class:`OverBudget` when not even one inference fits."""
    limit = budget if budget is not None else int(FRACTION * available_bytes())
    basis = "--memory-budget" if budget is not None else f"{FRACTION:.0%} of the available memory"
    notes: list[str] = []
    shapes = {s.name: [int(d) for d in s.shape] for s in specs}
    dynamic = any(s.tensor.is_dynamic or tuple(s.shape) != tuple(s.tensor.shape) for s in specs)
    static = _static_bytes(model)
    if dynamic or static > _SMALL * limit:
        say("measuring the memory of one CPU inference at the input shapes")
        need, what = measure_inference(data, shapes, signature, limit, timeout)
        shown = ", ".join(f"{n}={'x'.join(map(str, s))}" for n, s in list(shapes.items())[:4])
        shown += ", ..." if len(shapes) > 4 else ""
        if need is None or need * INTERPRETERS > limit:
            figure = f"more than {_gib(limit)}" if need is None else f"{_gib(need)} each"
            raise OverBudget(
                f"the model does not fit in memory at input shapes {shown}: one CPU inference "
                f"needs {figure} ({what if need is None else f'{INTERPRETERS} at once'}; budget "
                f"{_gib(limit)}, {basis}): give smaller shapes with --input-shape, or a larger "
                "--memory-budget"
            )
    else:
        need = static
    per_set = sum(int(np.prod(s.shape, dtype=np.int64)) * s.dtype.itemsize for s in specs)
    per_set *= 2 * max(runners, 1)  # each runner's copy of the inputs, and outputs about as big
    fits = int((limit - need * INTERPRETERS) // max(per_set, 1))
    if fits < count:
        if fits < 1:
            raise OverBudget(
                f"not one input set fits in memory ({_gib(per_set)} per set; budget "
                f"{_gib(limit)}, {basis}): give smaller shapes with --input-shape"
            )
        notes.append(
            f"{fits} input sets instead of {count}: {_gib(per_set)} per set across the runners, "
            f"{_gib(need)} per interpreter, within the memory budget of {_gib(limit)} ({basis})"
        )
        count = fits
    return count, notes
