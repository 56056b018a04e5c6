"""Build small example models with the IR (no TensorFlow) for rules and their tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tflkit import ir

if TYPE_CHECKING:
    import numpy as np

    from tflkit.ir.builder import OpBuilder


def options(kind: str, **fields: Any) -> Any:
    """An object-API options instance: ``options("SoftmaxOptions", beta=2.0)``."""
    value = getattr(ir.schema.fb, f"{kind}T")()
    for key, item in fields.items():
        setattr(value, key, item)
    return value


def i32(*values: int) -> np.ndarray:
    import numpy as np

    return np.array(values, np.int32)


def graph_model(
    inputs: Sequence[tuple[Sequence[int], Any]],
    body: Callable[..., Any],
    *,
    description: str = "tflkit rewrite example",
) -> ir.Model:
    """A one-signature model: ``body(builder, *input_tensors)`` returns the output tensor(s).

    Every example adds a MUL by 1 in front of each float input and behind each output, so the
    rewritten op sits between accelerated ops, as in a real network.
    """
    from tflkit.ir.builder import OpBuilder

    model = ir.Model(description=description)
    graph = model.add_subgraph("main")
    xs = [graph.new_tensor(f"x{i}", shape, dtype) for i, (shape, dtype) in enumerate(inputs)]
    b = OpBuilder(graph, prefix="ex")
    outs = body(b, *xs)
    outs = list(outs) if isinstance(outs, list | tuple) else [outs]
    graph.inputs, graph.outputs = xs, outs
    model.signatures.append(
        ir.SignatureDef(
            "serving_default",
            graph,
            {x.name: x for x in xs},
            {f"out{i}": t for i, t in enumerate(outs)},
        )
    )
    return model


def scale(b: OpBuilder, x: ir.Tensor, factor: float = 1.0) -> ir.Tensor:
    """x * factor (a float MUL: gives the example an accelerated neighbour)."""
    import numpy as np

    return b.MUL(x, np.array(factor, np.float32), options=options("MulOptions"), name="scale")


# --- references and quantized variants of examples --------------------------------------------

Feed = dict[str, "np.ndarray"]

#: Custom op codes of erf (no CPU kernel: a reference has to compute it).
ERF_CODES = ("Erf", "FlexErf")


def numpy_reference(model: ir.Model, feed: Feed) -> Feed:
    """The outputs of an example graph computed op by op in float32 with numpy.

    For examples whose original cannot run on the CPU interpreter (an ``Erf`` custom op, a
    BROADCAST_TO version without a kernel). Covers the ops those examples use; erf is correctly
    rounded to float32.
    """
    import math

    import numpy as np

    erf = np.vectorize(math.erf, otypes=[np.float64])
    values = {id(t): np.asarray(feed[t.name], np.float32) for t in model.main.inputs}

    def value(tensor: ir.Tensor) -> np.ndarray:
        return tensor.data.astype(np.float32) if tensor.is_constant else values[id(tensor)]

    for op in model.main.ops:
        args = [value(t) for t in op.inputs]
        if op.type in ERF_CODES:
            out = erf(args[0].astype(np.float64))
        elif op.type in ("ADD", "MUL", "DIV"):
            out = {"ADD": np.add, "MUL": np.multiply, "DIV": np.divide}[op.type](*args)
        elif op.type == "BROADCAST_TO":
            out = np.broadcast_to(args[0], op.outputs[0].shape)
        else:
            raise ValueError(f"numpy_reference has no {op.type}")
        values[id(op.outputs[0])] = np.asarray(out, np.float32)
    return {t.name: values[id(t)] for t in model.main.outputs}


#: Output quantization TFLite's int8 kernels require: (scale, zero point).
_FIXED_OUTPUT_QUANT = {
    "SOFTMAX": (1 / 256, -128),
    "LOG_SOFTMAX": (16 / 256, 127),
    "LOGISTIC": (1 / 256, -128),
    "TANH": (1 / 128, 0),
    "L2_NORMALIZATION": (1 / 128, 0),
}
#: Ops whose input 2 is a bias: int32, scale = input scale * weight scale.
_BIAS_OPS = {"CONV_2D": 2, "DEPTHWISE_CONV_2D": 2, "FULLY_CONNECTED": 2, "TRANSPOSE_CONV": 3}


def _quant(scale: float, zero_point: int) -> Any:
    q = ir.schema.fb.QuantizationParametersT()
    q.scale, q.zeroPoint = [float(scale)], [int(zero_point)]
    return q


def _activation_ranges(model: ir.Model, seeds: Sequence[int]) -> dict[str, tuple[float, float]]:
    """Min and max of every float tensor over seeded runs on the CPU interpreter."""
    import numpy as np

    from tflkit.delegates.litert_cpu import capture

    data = ir.dumps(model)
    names = {t.index: t.name for t in ir.load(data).main.tensors}
    ranges: dict[str, tuple[float, float]] = {}
    for seed in seeds:
        for index, value in capture(data, fill="random", seed=seed).items():
            if value.dtype != np.float32 or not value.size or index not in names:
                continue
            low, high = ranges.get(names[index], (0.0, 0.0))
            ranges[names[index]] = (min(low, float(value.min())), max(high, float(value.max())))
    return ranges


def int8_variant(model: ir.Model, seeds: Sequence[int] = (0, 1, 2)) -> ir.Model:
    """A full-int8 copy of a float example (int8 inputs, outputs and weights, int32 biases).

    Activations get asymmetric per-tensor scales from the float model's ranges on seeded
    inputs; float constants symmetric per-tensor int8. Raises ValueError when the float model
    does not run on the CPU interpreter (its variant could not be calibrated).
    """
    import numpy as np

    try:
        ranges = _activation_ranges(model, seeds)
    except (RuntimeError, ValueError) as exc:
        raise ValueError(f"the float example does not run on the CPU: {exc}") from None
    variant = ir.load(ir.dumps(model))
    graph = variant.main
    for op in graph.ops:  # these need one encoding for inputs and output: share a range
        if op.type in ("PACK", "CONCATENATION"):
            names = [t.name for t in (*op.inputs, *op.outputs) if t is not None]
            low = min(ranges.get(n, (0.0, 0.0))[0] for n in names)
            high = max(ranges.get(n, (0.0, 0.0))[1] for n in names)
            ranges.update({n: (low, high) for n in names})
    biases = {
        id(op.inputs[i]): op
        for op in graph.ops
        if (i := _BIAS_OPS.get(op.type)) is not None and i < len(op.inputs) and op.inputs[i]
    }
    fixed = {id(op.outputs[0]): _FIXED_OUTPUT_QUANT[op.type] for op in graph.ops
             if op.type in _FIXED_OUTPUT_QUANT and op.outputs}  # fmt: skip
    float32 = ir.schema.tensor_type(np.float32)
    others = [t for sg in variant.subgraphs[1:] for t in sg.tensors if t.is_constant]
    for tensor in [*graph.tensors, *others]:  # constants of other subgraphs (initializers) too
        if tensor.type != float32 or id(tensor) in biases:
            continue
        if tensor.is_constant:
            data = tensor.data.astype(np.float64)
            scale = float(np.abs(data).max()) / 127 or 1.0
            q = np.clip(np.round(data / scale), -127, 127).astype(np.int8)
            tensor.buffer = variant.intern_buffer(q)
            tensor.quantization = _quant(scale, 0)
        elif id(tensor) in fixed:
            tensor.quantization = _quant(*fixed[id(tensor)])
        else:
            low, high = ranges.get(tensor.name, (-1.0, 1.0))
            low, high = min(low, 0.0), max(high, 0.0)
            scale = (high - low) / 255 or 1.0
            zero_point = int(np.clip(round(-128 - low / scale), -128, 127))
            tensor.quantization = _quant(scale, zero_point)
        tensor.type = ir.schema.tensor_type(np.int8)
    for tensor_id, op in biases.items():
        tensor = next(t for t in op.inputs if t is not None and id(t) == tensor_id)
        x, w = op.inputs[0 if op.type != "TRANSPOSE_CONV" else 2], op.inputs[1]
        scale = x.quantization.scale[0] * w.quantization.scale[0]
        q = np.round(tensor.data.astype(np.float64) / scale).astype(np.int32)
        tensor.buffer = variant.intern_buffer(q)
        tensor.type = ir.schema.tensor_type(np.int32)
        tensor.quantization = _quant(scale, 0)
    for op in graph.ops:  # FILL writes its value's encoding
        if op.type == "FILL" and len(op.inputs) == 2 and op.inputs[1] is not None and op.outputs:
            op.outputs[0].quantization = op.inputs[1].quantization
    variant.description = "tflkit rewrite example (int8 variant)"
    return variant
