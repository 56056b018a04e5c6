"""Feature tags of a ``.tflite`` file, read with the raw LiteRT flatbuffer accessors.

Independent of ``tflkit.ir`` (the corpus must not trust the code it tests) and lazy: only the
tables a tag needs are touched, so tagging a 3,000-op model takes milliseconds.
"""

from __future__ import annotations

from ai_edge_litert import schema_py_generated as fb

#: Every tag ``model_tags`` can return, with what it means.
TAGS: dict[str, str] = {
    "float": "float32 activations, no quantized weights",
    "fp16-weights": "FLOAT16 constants feeding DEQUANTIZE",
    "dynamic-range": "an op takes int8/uint8 constant weights and produces float32",
    "int8": "quantized INT8 activations",
    "uint8": "quantized UINT8 activations",
    "sparse": "a tensor with sparsity parameters (DENSIFY)",
    "custom-op": "a CUSTOM operator",
    "if": "an IF op",
    "while": "a WHILE op",
    "call-once": "a CALL_ONCE op",
    "control-flow": "any of IF, WHILE, CALL_ONCE",
    "resource-variables": "VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE",
    "dynamic-shape": "a -1 in some tensor's shape_signature",
    "multi-signature": "more than one SignatureDef",
    "multi-subgraph": "more than one subgraph",
    "large": "more than 500 operators over all subgraphs",
}

LARGE_OPS = 500
_QUANTIZED = {fb.TensorType.INT8: "int8", fb.TensorType.UINT8: "uint8"}
_OPS = {
    fb.BuiltinOperator.IF: "if",
    fb.BuiltinOperator.WHILE: "while",
    fb.BuiltinOperator.CALL_ONCE: "call-once",
    fb.BuiltinOperator.VAR_HANDLE: "resource-variables",
    fb.BuiltinOperator.READ_VARIABLE: "resource-variables",
    fb.BuiltinOperator.ASSIGN_VARIABLE: "resource-variables",
    fb.BuiltinOperator.CUSTOM: "custom-op",
}


def _is_const(model: fb.Model, tensor: fb.Tensor) -> bool:
    index = tensor.Buffer()
    if index <= 0 or index >= model.BuffersLength():
        return False
    buffer = model.Buffers(index)
    return buffer.DataLength() > 0 or buffer.Size() > 0


def _is_quantized(tensor: fb.Tensor) -> bool:
    quant = tensor.Quantization()
    return quant is not None and quant.ScaleLength() > 0


def model_tags(data: bytes) -> frozenset[str]:
    """The feature tags (keys of ``TAGS``) of one ``.tflite`` file."""
    model = fb.Model.GetRootAs(data, 0)
    codes = []
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        codes.append(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()))
    tags: set[str] = set()
    n_ops = 0
    for s in range(model.SubgraphsLength()):
        sg = model.Subgraphs(s)
        tensors = [sg.Tensors(t) for t in range(sg.TensorsLength())]
        const = [_is_const(model, t) for t in tensors]
        for t, tensor in enumerate(tensors):
            if tensor.Sparsity() is not None:
                tags.add("sparse")
            if any(tensor.ShapeSignature(d) == -1 for d in range(tensor.ShapeSignatureLength())):
                tags.add("dynamic-shape")
            kind = _QUANTIZED.get(tensor.Type())
            if kind and not const[t] and _is_quantized(tensor):
                tags.add(kind)
        n_ops += sg.OperatorsLength()
        for o in range(sg.OperatorsLength()):
            op = sg.Operators(o)
            code = codes[op.OpcodeIndex()]
            if code in _OPS:
                tags.add(_OPS[code])
            inputs = [i for i in op.InputsAsNumpy().tolist() if i >= 0] if op.InputsLength() else []
            outputs = op.OutputsAsNumpy().tolist() if op.OutputsLength() else []
            in_types = {tensors[i].Type() for i in inputs if const[i]}
            out_types = {tensors[i].Type() for i in outputs if 0 <= i < len(tensors)}
            if code == fb.BuiltinOperator.DEQUANTIZE:
                if fb.TensorType.FLOAT16 in in_types:
                    tags.add("fp16-weights")
            elif in_types & set(_QUANTIZED) and fb.TensorType.FLOAT32 in out_types:
                tags.add("dynamic-range")
    if not tags & {"int8", "uint8", "dynamic-range"}:
        tags.add("float")
    if n_ops > LARGE_OPS:
        tags.add("large")
    if model.SignatureDefsLength() > 1:
        tags.add("multi-signature")
    if model.SubgraphsLength() > 1:
        tags.add("multi-subgraph")
    if tags & {"if", "while", "call-once"}:
        tags.add("control-flow")
    return frozenset(tags)
