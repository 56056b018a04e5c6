"""What a ``.tflite`` holds, from a GPU user's point of view: ``inspect_model`` -> InspectReport."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from tflkit import ir
from tflkit.fsio import sha256_of
from tflkit.report.inspect_report import (
    InspectReport,
    ModelWarning,
    QuantInfo,
    SignatureInfo,
    SubgraphInfo,
    TensorInfo,
)

CONTROL_FLOW_OPS = frozenset({"IF", "WHILE", "CALL_ONCE", "CALL"})
VARIABLE_OPS = frozenset({"VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"})
#: Highest tensor rank the GPU delegate accepts.
GPU_MAX_RANK = 4


def inspect_path(path: str | Path) -> InspectReport:
    """Load ``path`` and describe it."""
    data, label = ir.serde.read_model_bytes(path, mapped=True)  # weights stay on disk
    model = ir.load(data, label=label)
    return inspect_model(model, path=label, size_bytes=len(data), sha256=sha256_of(data))


def inspect_model(
    model: ir.Model,
    *,
    path: str | None = None,
    size_bytes: int | None = None,
    sha256: str | None = None,
) -> InspectReport:
    """Describe ``model``; ``size_bytes`` and ``sha256`` are its file's, when it has one."""
    histogram: Counter[str] = Counter()
    versions: dict[str, set[int]] = defaultdict(set)
    for op in model.iter_ops():
        histogram[op.type] += 1
        versions[op.type].add(op.version)
    custom = sorted({op.type for op in model.iter_ops() if op.is_custom and not op.opcode.is_flex})
    flex = sorted({op.type for op in model.iter_ops() if op.opcode.is_flex})
    runtime = model.metadata_entry("min_runtime_version")
    return InspectReport(
        path=path,
        size_bytes=size_bytes,
        sha256=sha256,
        schema_version=model.version,
        description=model.description,
        min_runtime_version=_metadata_text(runtime.buffer) if runtime else None,
        metadata=[m.name for m in model.metadata],
        subgraphs=[
            SubgraphInfo(i, sg.name, len(sg.ops), len(sg.tensors))
            for i, sg in enumerate(model.subgraphs)
        ],
        signatures=_signatures(model),
        op_histogram=dict(histogram.most_common()),
        op_versions={name: sorted(v) for name, v in sorted(versions.items())},
        custom_ops=custom,
        flex_ops=flex,
        weights_bytes_by_dtype=_weights_by_dtype(model),
        sparse_tensors=sum(1 for sg in model.subgraphs for t in sg.tensors if t.sparsity),
        warnings=_warnings(model, histogram, custom, flex),
        composites=_composites(model),
    )


def _composites(model: ir.Model) -> dict[str, dict[str, int]]:
    """Composite names and counts per calling subgraph (signature key, else subgraph name)."""
    from tflkit.ir.composites import composite_of

    keys = {id(s.subgraph): s.key for s in model.signatures}
    found: dict[str, dict[str, int]] = {}
    for i, sg in enumerate(model.subgraphs):
        for op in sg.ops:
            info = composite_of(op)
            if info is not None:
                where = found.setdefault(keys.get(id(sg)) or sg.name or f"subgraph {i}", {})
                where[info.name] = where.get(info.name, 0) + 1
    return found


def _metadata_text(buffer: ir.Buffer) -> str:
    return buffer.tobytes().split(b"\0", 1)[0].decode("utf-8", "replace")


def _tensor_info(name: str, tensor: ir.Tensor) -> TensorInfo:
    quant = None
    params = tensor.quant_params
    if params is not None:
        scales, zero_points = params.scales, params.zero_points
        quant = QuantInfo(
            scale=float(scales[0]) if scales.size == 1 else None,
            zero_point=int(zero_points[0]) if zero_points.size == 1 else None,
            channels=int(scales.size) if scales.size > 1 else None,
            axis=params.axis if scales.size > 1 else None,
        )
    return TensorInfo(
        name=name,
        tensor=tensor.name,
        shape=list(tensor.display_shape),
        dtype=tensor.type_name,
        quantization=quant,
    )


def _signatures(model: ir.Model) -> list[SignatureInfo]:
    if model.signatures:
        return [
            SignatureInfo(
                key=s.key,
                subgraph=s.subgraph.index,
                inputs=[_tensor_info(n, t) for n, t in s.inputs.items()],
                outputs=[_tensor_info(n, t) for n, t in s.outputs.items()],
            )
            for s in model.signatures
        ]
    if not model.subgraphs:
        return []
    main = model.main
    return [
        SignatureInfo(
            key=None,
            subgraph=0,
            inputs=[_tensor_info(t.name, t) for t in main.inputs],
            outputs=[_tensor_info(t.name, t) for t in main.outputs],
        )
    ]


def _weights_by_dtype(model: ir.Model) -> dict[str, int]:
    seen: set[int] = set()
    sizes: Counter[str] = Counter()
    for subgraph in model.subgraphs:
        for tensor in subgraph.tensors:
            if not tensor.is_constant or id(tensor.buffer) in seen:
                continue
            seen.add(id(tensor.buffer))
            sizes[tensor.type_name] += tensor.buffer.nbytes
    return dict(sizes.most_common())


def _warnings(
    model: ir.Model, histogram: Counter[str], custom: list[str], flex: list[str]
) -> list[ModelWarning]:
    if not model.subgraphs:
        return [ModelWarning("EMPTY_MODEL", "the model has no subgraphs")]
    main = model.main
    tensors = [t for sg in model.subgraphs for t in sg.tensors]
    shown = _shown_names(model)

    def name(t: ir.Tensor) -> str:
        return shown.get(id(t), t.name)

    variables = sorted(set(histogram) & VARIABLE_OPS) + [t.name for t in tensors if t.is_variable]
    quantized_io = [
        name(t) for t in (*main.inputs, *main.outputs) if t.type_name in ("INT8", "UINT8", "INT16")
    ]
    found = [
        _warning(
            "DYNAMIC_SHAPE",
            "inputs with dynamic dimensions; the GPU delegate needs static shapes "
            "(fix them with --input-shape)",
            [name(t) for t in main.inputs if t.is_dynamic],
        ),
        _warning(
            "INT64",
            "int64 tensors; the GPU delegate does not take int64",
            [name(t) for t in tensors if t.type_name == "INT64" and not t.is_constant],
        ),
        _warning(
            "RANK_GT_4",
            f"tensors of rank > {GPU_MAX_RANK}; the GPU delegate handles at most 4-D",
            [name(t) for t in tensors if t.rank > GPU_MAX_RANK],
        ),
        _control_flow_warning(model, histogram),
        _warning(
            "RESOURCE_VARIABLES",
            "resource variables or stateful tensors; these ops stay on CPU",
            variables,
        ),
        _warning("CUSTOM_OP", "custom ops; the GPU delegate does not run them", custom),
        _warning(
            "FLEX_OP", "TensorFlow (flex) ops; they need the flex delegate and run on CPU", flex
        ),
        _warning(
            "QUANTIZED_IO",
            "integer inputs/outputs; the GPU delegate computes in float and converts at the edges",
            quantized_io,
        ),
        _warning(
            "SPARSE_WEIGHTS",
            "sparse weights (DENSIFY); densify them before the GPU can use them",
            [t.name for t in tensors if t.sparsity is not None],
        ),
        _warning(
            "WRONG_ON_GPU",
            "ops the GPU accelerator takes but computes wrong in this form (`check` says why, "
            "`rewrite` fixes what a rule covers)",
            _wrong_on_gpu(model),
        ),
        _warning(
            "NON_NUMERIC",
            "string/resource/variant tensors; CPU only",
            [t.name for t in tensors if t.type_name in ("STRING", "RESOURCE", "VARIANT")],
        ),
    ]
    return [w for w in found if w is not None]


def _shown_names(model: ir.Model) -> dict[int, str]:
    """The name the signature table shows for each signature input and output tensor (its
    signature name), by tensor identity; other tensors go by their own names."""
    shown: dict[int, str] = {}
    for signature in model.signatures:
        for mapping in (signature.inputs, signature.outputs):
            for key, tensor in dict(mapping).items():
                shown.setdefault(id(tensor), key)
    return shown


def _wrong_on_gpu(model: ir.Model) -> list[str]:
    """``"#INDEX TYPE"`` of each op the litert-gpu table says the GPU computes wrong
    (``WRONG_RESULT``; subgraph index too when not the main graph)."""
    from tflkit.compat.reasons import Reason
    from tflkit.compat.static import op_verdicts

    return [
        f"#{v.op_index} {v.op_type}"
        + (f" (subgraph {v.subgraph_index})" if v.subgraph_index else "")
        for v in op_verdicts(model)
        if any(r.code == Reason.WRONG_RESULT for r in v.rejections)
    ]


def _warning(code: str, message: str, subjects: list[str]) -> ModelWarning | None:
    """A warning about ``subjects``, or None when there are none."""
    return ModelWarning(code, message, subjects) if subjects else None


def _control_flow_warning(model: ir.Model, histogram: Counter[str]) -> ModelWarning | None:
    """Control-flow ops, or subgraphs that are neither entry points nor decompositions."""
    control = sorted(set(histogram) & CONTROL_FLOW_OPS)
    # entry points of their own (signatures) and composite decompositions are no control flow
    plain = {id(s.subgraph) for s in model.signatures} | {
        id(model.subgraphs[i])
        for op in model.iter_ops()
        if op.type == "STABLEHLO_COMPOSITE"
        for i in op.referenced_subgraphs.values()
        if 0 <= i < len(model.subgraphs)
    }
    others = sum(1 for sg in model.subgraphs[1:] if id(sg) not in plain)
    if not (control or others):
        return None
    return ModelWarning(
        "CONTROL_FLOW",
        f"{len(model.subgraphs)} subgraphs; control-flow ops and their bodies run on CPU",
        control,
    )
