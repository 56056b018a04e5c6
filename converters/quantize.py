"""Quantization of ONNX and PyTorch sources: ai-edge-quantizer on the converted float model.

The quantizer runs in the PyTorch route's environment (``_quantize_worker.py``). Its full-int8
recipe makes the model's inputs and outputs int8; unless ``--int8-io`` asks for that, tflkit
puts a QUANTIZE in front of each int8 input and a DEQUANTIZE behind each int8 output, so the
model takes and gives float32 like the Keras route's int8 models (the GPU delegate runs both).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tflkit import ir
from tflkit.ir.builder import OpBuilder
from tflkit.ir.entry import entry_point
from tflkit.ir.graph import SignatureDef

from .base import ConvertOptions
from .calibration import InputSpec, calibration_feeds

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["SIGNATURE_KEY", "float_io", "quantize_converted", "with_signature"]


def float_io(model: ir.Model) -> int:
    """Give every int8 input and output of the entry point a float32 twin (QUANTIZE in front,
    DEQUANTIZE behind), keeping the names the user sees; returns how many were wrapped."""
    key, subgraph, ins, outs = entry_point(model)
    signature = model.signature(key) if key is not None else None
    wrapped = 0
    for name, tensor in ins.items():
        if tensor.dtype != np.int8 or tensor.quantization is None:
            continue
        outer = subgraph.new_tensor(tensor.name, tensor.shape, np.float32)
        tensor.name = subgraph.unique_name(f"{tensor.name}/int8")
        OpBuilder(subgraph, before=subgraph.ops[0]).QUANTIZE(outer, outputs=[tensor])
        subgraph.inputs = [outer if t is tensor else t for t in subgraph.inputs]
        if signature is not None:
            signature.inputs[name] = outer
        wrapped += 1
    for name, tensor in outs.items():
        if tensor.dtype != np.int8 or tensor.quantization is None:
            continue
        outer = subgraph.new_tensor(tensor.name, tensor.shape, np.float32)
        tensor.name = subgraph.unique_name(f"{tensor.name}/int8")
        OpBuilder(subgraph, after=subgraph.ops[-1]).DEQUANTIZE(tensor, outputs=[outer])
        subgraph.outputs = [outer if t is tensor else t for t in subgraph.outputs]
        if signature is not None:
            signature.outputs[name] = outer
        wrapped += 1
    return wrapped


#: The key of the signature tflkit gives a signature-less model.
SIGNATURE_KEY = "serving_default"


def with_signature(data: bytes) -> bytes:
    """``data`` with a signature over its main graph: inputs and outputs by tensor name (what
    the runtimes call them without one), so signature-based tools take it."""
    model = ir.load(data)
    graph = model.main
    inputs = {t.name: t for t in graph.inputs}
    outputs = {t.name: t for t in graph.outputs}
    model.signatures.append(SignatureDef(SIGNATURE_KEY, graph, inputs, outputs))
    return ir.dumps(model)


def quantize_converted(
    data: bytes, options: ConvertOptions, work: Path, run: Callable[..., dict[str, Any]]
) -> tuple[bytes, dict[str, Any]]:
    """``--quantize dynamic|int8`` of the float model ``data``: ``(quantized bytes, worker
    state)``. ``run(**job)`` runs the quantize worker; int8 calibrates on ``--representative``
    (an ``.npz`` in the source's layout or the model's, or an image folder)."""
    key, _, ins, _ = entry_point(ir.load(data))
    added = key is None
    if added:  # ai-edge-quantizer works by signature
        data = with_signature(data)
        key, _, ins, _ = entry_point(ir.load(data))
    (work / "float.tflite").write_bytes(data)
    if options.quantize == "int8":
        assert options.representative is not None  # ConvertOptions.validate
        specs = [InputSpec(n, tuple(t.shape), str(np.dtype(t.dtype))) for n, t in ins.items()]
        feeds = calibration_feeds(
            options.representative,
            specs,
            steps=options.calibration_steps,
            value_range=options.image_range,
        )
        arrays = {f"s{k}__{n}": v for k, feed in enumerate(feeds) for n, v in feed.items()}
        np.savez(work / "calibration.npz", **arrays)
    state = run(source=work / "float.tflite", mode=options.quantize, signature=key)
    if added:
        state.setdefault("notes", []).append(
            f"the converted model had no signature: tflkit gave it one ({SIGNATURE_KEY}, inputs "
            "and outputs by their tensor names) for the quantizer; apps may call it by that key"
        )
    quantized = (work / "quantized.tflite").read_bytes()
    if options.quantize == "int8" and not options.int8_io:
        model = ir.load(quantized)
        if float_io(model):
            quantized = ir.dumps(model)
    return quantized, state
