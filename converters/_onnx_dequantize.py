"""ONNX Runtime's integer and QDQ ops turned into the float ops both routes convert.

Loaded beside ``_onnx_prepare`` (numpy and onnx only). What ``onnxruntime.quantization`` writes:

* ``quantize_dynamic``: ``DynamicQuantizeLinear(x)`` feeding ``MatMulInteger`` or
  ``ConvInteger`` with int8/uint8 weights, then ``Cast`` to float and a ``Mul`` by
  ``x_scale * w_scale``: the chain becomes ``MatMul(x, W)`` / ``Conv(x, W)`` with
  ``W = (w - w_zero_point) * w_scale``;
* ``quantize_static`` (QDQ format, the default): ``DequantizeLinear`` of int8 weights becomes a
  float initializer, and each ``QuantizeLinear -> DequantizeLinear`` pair on an activation goes
  (the float value passes through, without the int8 rounding);
* ``quantize_static`` (QOperator format): ``QLinearConv`` / ``QLinearMatMul`` become
  ``DequantizeLinear -> Conv/MatMul (float weights, float bias) -> QuantizeLinear``, whose pairs
  then go as above.

The weights keep the values the quantized model computes with (dequantized exactly); what is
lost is the rounding of activations to int8, which the validation against ONNX Runtime's outputs
of the quantized original measures. Ops of other domains (``com.microsoft``
``DynamicQuantizeLSTM``, ``QLinearAdd``...) are left and named.
"""

import numpy as np

#: Integer ops this module turns into float ones (the rest of ``QUANTIZED`` is named, not done).
HANDLED = (
    "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger", "QLinearConv", "QLinearMatMul",
    "QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool", "QLinearSigmoid", "QuantizeLinear",
    "DequantizeLinear",
)  # fmt: skip
QUANTIZED = frozenset(HANDLED) | {
    "QLinearConcat", "QGemm", "DynamicQuantizeLSTM", "QAttention", "QLinearLeakyRelu",
}  # fmt: skip


class _Graph:
    """The graph's nodes, constants (initializers and Constant nodes) and readers by name."""

    def __init__(self, model):
        from onnx import numpy_helper

        self.graph = model.graph
        self.consts = {i.name: numpy_helper.to_array(i) for i in self.graph.initializer}
        for node in self.graph.node:
            if node.op_type == "Constant" and node.attribute:
                value = node.attribute[0]
                if value.name == "value":
                    self.consts[node.output[0]] = numpy_helper.to_array(value.t)
        self.outputs = {o.name for o in self.graph.output}

    def producer(self, name):
        return next((n for n in self.graph.node if name in n.output), None)

    def readers(self, name):
        return [n for n in self.graph.node if name in n.input]

    def add_const(self, name, array):
        from onnx import numpy_helper

        self.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        self.consts[name] = array
        return name

    def rename_uses(self, old, new):
        for node in self.graph.node:
            for i, name in enumerate(node.input):
                if name == old:
                    node.input[i] = new
        for out in self.graph.output:
            if out.name == old:  # a graph output keeps its name: its producer writes it
                producer = self.producer(new)
                producer.output[list(producer.output).index(new)] = old
                self.rename_uses(new, old)


def _zp(graph, name):
    return graph.consts.get(name, np.zeros((), np.int32)) if name else np.zeros((), np.int32)


def _weights(graph, w, scale, zero, axis):
    """``(w - zero) * scale`` of a constant, per channel along ``axis`` when scale is 1-D."""
    q, s, z = graph.consts[w], graph.consts[scale], _zp(graph, zero)
    if s.ndim == 1 and s.size > 1:
        shape = [1] * q.ndim
        shape[axis] = s.size
        s, z = s.reshape(shape), z.reshape(shape) if z.ndim == 1 else z
    return ((q.astype(np.float32) - z.astype(np.float32)) * s).astype(np.float32)


def _attrs(node):
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _dynamic(graph, node, counts):
    """MatMulInteger / ConvInteger fed by DynamicQuantizeLinear, then Cast and Mul: float."""
    from onnx import helper

    if node.op_type not in ("MatMulInteger", "ConvInteger"):
        return False
    dql = graph.producer(node.input[0])
    if dql is None or dql.op_type != "DynamicQuantizeLinear" or node.input[1] not in graph.consts:
        return False
    casts = graph.readers(node.output[0])
    if len(casts) != 1 or casts[0].op_type != "Cast":
        return False
    cast = casts[0]
    muls = graph.readers(cast.output[0])
    if len(muls) != 1 or muls[0].op_type != "Mul":
        return False
    mul = muls[0]
    scale_name = next(n for n in mul.input if n != cast.output[0])
    scales = graph.producer(scale_name)
    if scales is None or scales.op_type != "Mul" or dql.output[1] not in scales.input:
        return False
    w_scale = next(n for n in scales.input if n != dql.output[1])
    if w_scale not in graph.consts:
        return False
    zero = node.input[3] if len(node.input) > 3 else ""
    conv = node.op_type == "ConvInteger"
    weights = _weights(graph, node.input[1], w_scale, zero, 0 if conv else -1)
    name = graph.add_const(f"{node.output[0]}/float_weights", weights)
    kind = "Conv" if conv else "MatMul"
    float_node = helper.make_node(kind, [dql.input[0], name], [mul.output[0]], **_attrs(node))
    graph.graph.node.insert(list(graph.graph.node).index(mul), float_node)
    for dead in (node, cast, mul):
        graph.graph.node.remove(dead)
    counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return True


def _qlinear(graph, node, counts):
    """QLinearConv / QLinearMatMul: DequantizeLinear, the float op, QuantizeLinear."""
    from onnx import helper

    if node.op_type in _QLINEAR_FLOAT:
        return _qlinear_activation(graph, node, counts)
    if node.op_type not in ("QLinearConv", "QLinearMatMul"):
        return False
    x, xs, xz, w, ws, wz, ys, yz = node.input[:8]
    if w not in graph.consts or ws not in graph.consts:
        return False
    conv = node.op_type == "QLinearConv"
    weights = _weights(graph, w, ws, wz, 0 if conv else -1)
    base = node.output[0]
    inputs = [f"{base}/x_float", graph.add_const(f"{base}/float_weights", weights)]
    if conv and len(node.input) > 8 and node.input[8] in graph.consts:
        bias = graph.consts[node.input[8]].astype(np.float32)
        bias = bias * (graph.consts[xs] * graph.consts[ws]).astype(np.float32).reshape(-1)
        inputs.append(graph.add_const(f"{base}/float_bias", bias.astype(np.float32)))
    at = list(graph.graph.node).index(node)
    new = [
        helper.make_node("DequantizeLinear", [x, xs, xz], [inputs[0]]),
        helper.make_node("Conv" if conv else "MatMul", inputs, [f"{base}/y_float"], **_attrs(node)),
        helper.make_node("QuantizeLinear", [f"{base}/y_float", ys, yz], [base]),
    ]
    graph.graph.node.remove(node)
    for offset, made in enumerate(new):
        graph.graph.node.insert(at + offset, made)
    counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return True


#: com.microsoft QLinear ops of activations: the float op, and how many (x, scale, zero point)
#: triples precede the output's (scale, zero point).
_QLINEAR_FLOAT = {
    "QLinearAdd": ("Add", 2),
    "QLinearMul": ("Mul", 2),
    "QLinearGlobalAveragePool": ("GlobalAveragePool", 1),
    "QLinearSigmoid": ("Sigmoid", 1),
}


def _qlinear_activation(graph, node, counts):
    """QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearSigmoid: DequantizeLinear of
    each input, the float op, QuantizeLinear."""
    from onnx import helper

    kind, count = _QLINEAR_FLOAT[node.op_type]
    if _attrs(node).get("channels_last", 0):
        return False
    base = node.output[0]
    made, floats = [], []
    for k in range(count):
        x, scale, zero = node.input[3 * k : 3 * k + 3]
        floats.append(f"{base}/in{k}_float")
        made.append(helper.make_node("DequantizeLinear", [x, scale, zero], [floats[-1]]))
    y_scale, y_zero = node.input[3 * count : 3 * count + 2]
    made.append(helper.make_node(kind, floats, [f"{base}/y_float"]))
    made.append(helper.make_node("QuantizeLinear", [f"{base}/y_float", y_scale, y_zero], [base]))
    at = list(graph.graph.node).index(node)
    graph.graph.node.remove(node)
    for offset, new in enumerate(made):
        graph.graph.node.insert(at + offset, new)
    counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return True


def _qdq(graph, node, counts):
    """DequantizeLinear of a constant -> a float constant; QuantizeLinear -> DequantizeLinear
    on an activation -> the float value itself."""
    if node.op_type == "DequantizeLinear" and node.input[0] in graph.consts:
        if len(node.input) < 2 or node.input[1] not in graph.consts:
            return False
        axis = _attrs(node).get("axis", 1)
        zero = node.input[2] if len(node.input) > 2 else ""
        values = _weights(graph, node.input[0], node.input[1], zero, axis)
        out = node.output[0]
        graph.graph.node.remove(node)
        graph.add_const(out, values)
        counts["DequantizeLinear (weights)"] = counts.get("DequantizeLinear (weights)", 0) + 1
        return True
    if node.op_type != "QuantizeLinear":
        return False
    readers = graph.readers(node.output[0])
    if not readers or any(r.op_type != "DequantizeLinear" for r in readers):
        return False
    if node.output[0] in graph.outputs:
        return False
    for dq in readers:
        graph.graph.node.remove(dq)
        graph.rename_uses(dq.output[0], node.input[0])
    graph.graph.node.remove(node)
    counts["QuantizeLinear/DequantizeLinear pair"] = counts.get(
        "QuantizeLinear/DequantizeLinear pair", 0
    ) + len(readers)
    return True


def _drop_dead(graph):
    """Nodes none of whose outputs is read or a graph output (a DynamicQuantizeLinear left)."""
    changed = True
    while changed:
        changed = False
        read = {name for n in graph.graph.node for name in n.input} | graph.outputs
        for node in list(graph.graph.node):
            if not any(o in read for o in node.output if o):
                graph.graph.node.remove(node)
                changed = True
    used = {name for n in graph.graph.node for name in n.input} | graph.outputs
    for init in list(graph.graph.initializer):
        if init.name not in used:
            graph.graph.initializer.remove(init)


def dequantize(model, say):
    """Turn ONNX Runtime's integer and QDQ ops of ``model`` into float ops, in place; say what
    was done and what is left. True when anything changed."""
    if not any(n.op_type in QUANTIZED for n in model.graph.node):
        return False
    graph = _Graph(model)
    counts = {}
    for step in (_dynamic, _qlinear, _qdq):
        progress = True
        while progress:
            progress = False
            for node in list(graph.graph.node):
                if node.op_type in HANDLED and step(graph, node, counts):
                    progress = True
                    break
    _drop_dead(graph)
    left = sorted({n.op_type for n in graph.graph.node if n.op_type in QUANTIZED})
    if counts:
        done = ", ".join(f"{n} x{k}" for n, k in counts.items())
        say(
            f"dequantized ONNX Runtime's quantization ({done}) into float ops; the weights keep "
            "their quantized values; quantize the converted model for LiteRT with --quantize "
            "dynamic or --quantize int8"
        )
    if left:
        say(f"quantized ops left as they are (no float form here): {', '.join(left)}")
    return bool(counts)
