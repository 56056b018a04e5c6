"""LiteRT on the CPU, in this process: the one place tflkit starts the CPU ``Interpreter``.

The classic ``Interpreter`` reads every dtype back (int64 included), so it is the ground every
other runner is compared with. ``kernels`` picks its op resolver:

- ``"xnnpack"`` (``OpResolverType.BUILTIN``): the builtin kernels with the default XNNPACK
  delegate, what an app gets;
- ``"reference"`` (``BUILTIN_REF``): the slow, straightforward kernels, useful to tell an XNNPACK
  difference from a model problem, and the ground for localization;
- ``"builtin"`` (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``): the optimized builtin kernels without
  XNNPACK, so a comparison sees a graph change and nothing else (rewrite verification).

:class:`LiteRTCpuRunner` runs input sets as a runner; :func:`run_once` runs one feed and returns
inputs and outputs by tensor name; :func:`capture` keeps every intermediate tensor of one run;
:func:`computed_shapes` reads the shapes the runtime computed; :func:`start_interpreter` gives
the interpreter itself to code that keeps it (one interpreter per op, state across steps).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tflkit.errors import UsageError

from .protocol import Feed, RunnerId, RunResult

__all__ = [
    "KERNELS",
    "CpuRun",
    "LiteRTCpuRunner",
    "capture",
    "computed_shapes",
    "invoke_slots",
    "run_once",
    "start_interpreter",
]

KERNELS = ("xnnpack", "reference", "builtin")
#: a runner's name on these kernels when none is given (the registry's cpu and cpu-ref; cpu-builtin)
_VARIANT = {"xnnpack": None, "reference": "ref"}
_RESOLVERS = {
    "xnnpack": "BUILTIN",
    "reference": "BUILTIN_REF",
    "builtin": "BUILTIN_WITHOUT_DEFAULT_DELEGATES",
}
_LABELS = {
    "xnnpack": "XNNPACK",
    "reference": "reference (BUILTIN_REF)",
    "builtin": "builtin (no default delegate)",
}
#: a feed or shape key: an input's tensor name, or its tensor index
Key = str | int


def start_interpreter(
    model: bytes,
    *,
    kernels: str = "xnnpack",
    preserve_all_tensors: bool = False,
    num_threads: int | None = None,
) -> Any:
    """A LiteRT CPU ``Interpreter`` for ``model`` with the ``kernels``' op resolver (not
    allocated). ``preserve_all_tensors`` keeps every intermediate readable after ``invoke``."""
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {KERNELS}, got {kernels!r}")
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    return Interpreter(
        model_content=model,
        experimental_op_resolver_type=getattr(OpResolverType, _RESOLVERS[kernels]),
        experimental_preserve_all_tensors=preserve_all_tensors,
        num_threads=num_threads,
    )


@dataclass
class CpuRun:
    """One run: the values fed and the outputs, by tensor name (the interpreter's names)."""

    inputs: dict[str, np.ndarray]
    outputs: dict[str, np.ndarray]
    #: the outputs in the model's order (the interpreter renames some, e.g. DENSIFY's)
    ordered: list[np.ndarray]


def run_once(
    model: bytes,
    feed: Mapping[Key, Any] | None = None,
    *,
    kernels: str = "xnnpack",
    shapes: Mapping[Key, Sequence[int]] | None = None,
    fill: str | None = None,
    seed: int = 0,
    cast: bool = False,
) -> CpuRun:
    """Run ``model`` once on the CPU interpreter.

    ``feed`` gives input values by tensor name or index (with ``cast``, converted to the input's
    dtype; else a value of another dtype is an error); inputs it does not name are an error
    unless ``fill`` is "zeros" or "random" (the seeded values of :mod:`tflkit.ir.feeds`).
    ``shapes`` resizes inputs first (a fed value's shape wins).
    """
    interpreter, fed = _invoke(
        model, feed, kernels=kernels, shapes=shapes, fill=fill, seed=seed, cast=cast
    )
    details = interpreter.get_output_details()
    ordered = [np.array(interpreter.get_tensor(d["index"])) for d in details]
    return CpuRun(fed, {d["name"]: v for d, v in zip(details, ordered, strict=True)}, ordered)


def capture(
    model: bytes,
    feed: Mapping[Key, Any] | None = None,
    *,
    kernels: str = "reference",
    tensors: Iterable[int] | None = None,
    fill: str | None = None,
    seed: int = 0,
) -> dict[int, np.ndarray]:
    """Every tensor of subgraph 0 after one run (or the ``tensors`` given), by tensor index,
    with intermediates preserved; tensors the runtime cannot read back are left out. The
    reference kernels by default: the ground localization compares against."""
    interpreter, _ = _invoke(
        model, feed, kernels=kernels, fill=fill, seed=seed, preserve_all_tensors=True
    )
    # resource and variant tensors (dtype object) crash get_tensor: never read them
    readable = {
        d["index"]
        for d in interpreter.get_tensor_details()
        if np.dtype(d["dtype"]) != np.dtype(object)
    }
    values: dict[int, np.ndarray] = {}
    for index in readable if tensors is None else tensors:
        if index not in readable:
            continue
        try:
            values[index] = np.array(interpreter.get_tensor(index))
        except ValueError:
            continue
    return values


def computed_shapes(
    model: bytes,
    shapes: Mapping[Key, Sequence[int]],
    *,
    kernels: str = "builtin",
    fill: str = "zeros",
    seed: int = 0,
) -> dict[int, list[int]]:
    """Tensor index -> shape of every tensor of subgraph 0 after one run with the inputs
    resized to ``shapes`` (strictly: only dynamic dimensions may change), fed zeros or seeded
    random values (``fill``): the runtime's own shape inference, dynamic tensors included."""
    interpreter, _ = _invoke(
        model, None, kernels=kernels, shapes=shapes, fill=fill, seed=seed, strict=True
    )
    return {d["index"]: [int(x) for x in d["shape"]] for d in interpreter.get_tensor_details()}


def _invoke(
    model: bytes,
    feed: Mapping[Key, Any] | None,
    *,
    kernels: str,
    shapes: Mapping[Key, Sequence[int]] | None = None,
    fill: str | None = None,
    seed: int = 0,
    strict: bool = False,
    preserve_all_tensors: bool = False,
    cast: bool = False,
) -> tuple[Any, dict[str, np.ndarray]]:
    """Start, resize, allocate, feed and invoke; the interpreter and the values fed by name."""
    if fill not in (None, "zeros", "random"):
        raise ValueError(f"fill must be None, 'zeros' or 'random', got {fill!r}")
    interpreter = start_interpreter(
        model, kernels=kernels, preserve_all_tensors=preserve_all_tensors
    )
    details = interpreter.get_input_details()
    given = {_slot(details, key): value for key, value in (feed or {}).items()}
    given.pop(None, None)
    wanted = {_slot(details, key): tuple(dims) for key, dims in (shapes or {}).items()}
    wanted.update({index: np.shape(value) for index, value in given.items()})
    wanted.pop(None, None)
    for detail in details:
        dims = wanted.get(detail["index"])
        if dims is not None and tuple(int(d) for d in dims) != tuple(detail["shape"]):
            interpreter.resize_tensor_input(detail["index"], [int(d) for d in dims], strict=strict)
    interpreter.allocate_tensors()
    details = interpreter.get_input_details()
    missing = [d for d in details if d["index"] not in given]
    if missing and fill is None:
        raise UsageError(f"no value given for model inputs {[d['name'] for d in missing]}")
    fed = {
        d["name"]: np.asarray(given[d["index"]], dtype=d["dtype"] if cast else None)
        for d in details
        if d["index"] in given
    }
    if missing and fill == "zeros":
        fed.update({d["name"]: np.zeros(d["shape"], d["dtype"]) for d in missing})
    elif missing:
        fed.update(_random_values(model, missing, seed))
    for detail in details:
        interpreter.set_tensor(detail["index"], fed[detail["name"]])
    interpreter.invoke()
    return interpreter, {d["name"]: fed[d["name"]] for d in details}


def invoke_slots(interpreter: Any, values: Mapping[int, np.ndarray]) -> None:
    """Feed ``values`` (by input tensor index) to a started ``interpreter`` and invoke it: an
    input whose value has another shape than the last is resized first, and the interpreter
    (re)allocated when it has to be; what a runner that re-invokes one interpreter calls."""
    shapes = getattr(interpreter, "_tflkit_shapes", None)
    if shapes is None:
        shapes = {d["index"]: tuple(d["shape"]) for d in interpreter.get_input_details()}
        interpreter._tflkit_shapes, interpreter._tflkit_allocated = shapes, False
    for slot, value in values.items():
        if shapes.get(slot) != value.shape:
            interpreter.resize_tensor_input(slot, value.shape)
            shapes[slot], interpreter._tflkit_allocated = value.shape, False
    if not interpreter._tflkit_allocated:
        interpreter.allocate_tensors()
        interpreter._tflkit_allocated = True
    for slot, value in values.items():
        interpreter.set_tensor(slot, value)
    interpreter.invoke()


def _slot(details: Sequence[dict[str, Any]], key: Key) -> int | None:
    """The tensor index of the input ``key`` names (tensor name or index), None if none."""
    for detail in details:
        if detail["index"] == key if isinstance(key, (int, np.integer)) else detail["name"] == key:
            return int(detail["index"])
    return None


def _random_values(
    model: bytes, details: Sequence[dict[str, Any]], seed: int
) -> dict[str, np.ndarray]:
    """Seeded random values for the inputs ``details`` describe, at their allocated shapes."""
    from tflkit import ir
    from tflkit.ir.feeds import random_feed

    tensors = ir.load(model).main.tensors
    shapes = {d["name"]: [int(x) for x in d["shape"]] for d in details}
    return random_feed([tensors[d["index"]] for d in details], seed, shapes)


class LiteRTCpuRunner:
    """Runs a ``.tflite`` with ``ai_edge_litert.interpreter.Interpreter`` on the CPU."""

    def __init__(
        self,
        model: bytes,
        *,
        kernels: str = "xnnpack",
        signature: str | None = None,
        num_threads: int | None = None,
        name: str | None = None,
    ) -> None:
        if kernels not in KERNELS:
            raise ValueError(f"kernels must be one of {KERNELS}, got {kernels!r}")
        self.model = model
        self.kernels = kernels
        self.signature = signature
        self.num_threads = num_threads
        self.name = name or RunnerId("cpu", _VARIANT.get(kernels, kernels)).name
        self._interpreter: Any = None
        self._compile_seconds: float | None = None
        self._signatures: dict[str, Any] = {}

    def activate(self) -> None:
        start = time.perf_counter()
        self._interpreter = start_interpreter(
            self.model, kernels=self.kernels, num_threads=self.num_threads
        )
        # No allocate_tensors() here: the first feed resizes dynamic inputs first (XNNPACK
        # cannot prepare some graphs at the stored placeholder shape, e.g. [1, 1] audio).
        self._compile_seconds = time.perf_counter() - start

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        interpreter = self._interpreter
        signatures = interpreter.get_signature_list()
        if not signatures and self.signature is not None:
            raise ValueError(
                f"the model has no signatures, so --signature {self.signature!r} is unknown"
            )
        # without signatures: inputs and outputs by tensor name (as tflkit's entry point names them)
        call = self._signature_call(signatures) if signatures else self._tensor_call()
        outputs, times = [], []
        for feed in feeds:
            start = time.perf_counter()
            result = call(feed)
            times.append(time.perf_counter() - start)
            outputs.append(result)
        return RunResult(
            self.name,
            "ok",
            outputs=outputs,
            executed={
                "runtime": "LiteRT Interpreter",
                "device": "CPU",
                "kernels": _LABELS[self.kernels],
                "precision": self._precision(),
            },
            compile_seconds=self._compile_seconds,
            infer_seconds=times,
        )

    def run_signature(self, key: str, feed: Feed) -> dict[str, np.ndarray]:
        """Signature ``key`` once on ``feed`` (by input name), with the one interpreter
        ``activate`` started: what a program of several signatures (an LLM's prefill and
        decode steps) calls, each call's outputs copied out of the interpreter."""
        if key not in self._signatures:
            self._signatures[key] = self._interpreter.get_signature_runner(key)
        return {k: np.array(v) for k, v in self._signatures[key](**feed).items()}

    def _precision(self) -> str:
        """ "int8" when ops write quantized 8-bit tensors (the kernels compute on their grid),
        "fp32, int8 weights" when only constants are quantized (dynamic range), else "fp32"."""
        interpreter = self._interpreter
        written = {i for op in interpreter._get_ops_details() for i in op["outputs"]}
        weights = False
        for detail in interpreter.get_tensor_details():
            scales = detail.get("quantization_parameters", {}).get("scales")
            if detail["dtype"] in (np.int8, np.uint8) and scales is not None and len(scales):
                if detail["index"] in written:
                    return "int8"
                weights = True
        return "fp32, int8 weights" if weights else "fp32"

    def _signature_call(self, signatures: dict[str, Any]) -> Any:
        key = self.signature or next(iter(signatures))
        if key not in signatures:
            raise ValueError(f"no signature {key!r}; the model has {list(signatures)}")
        runner = self._interpreter.get_signature_runner(key)

        def call(feed: Feed) -> dict[str, np.ndarray]:
            return {k: np.array(v) for k, v in runner(**feed).items()}

        return call

    def _tensor_call(self) -> Any:
        interpreter = self._interpreter
        inputs = {d["name"]: d["index"] for d in interpreter.get_input_details()}
        outputs = interpreter.get_output_details()

        def call(feed: Feed) -> dict[str, np.ndarray]:
            invoke_slots(interpreter, {inputs[n]: np.asarray(a) for n, a in feed.items()})
            return {d["name"]: np.array(interpreter.get_tensor(d["index"])) for d in outputs}

        return call

    def deactivate(self) -> None:
        self._interpreter = None
        self._signatures = {}
