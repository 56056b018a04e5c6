"""The ``inspect`` report: plain dataclasses, serialisable with ``to_json``.

JSON schema ``tflkit.inspect/1`` is documented in ``docs/json.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tflkit.jsonable import plain_fields

INSPECT_SCHEMA = "tflkit.inspect/1"


@dataclass
class QuantInfo:
    """Per-tensor (scale, zero_point) or per-channel (channels, axis) quantization."""

    scale: float | None
    zero_point: int | None
    channels: int | None = None
    axis: int | None = None


@dataclass
class TensorInfo:
    name: str
    tensor: str
    shape: list[int | str]
    dtype: str
    quantization: QuantInfo | None = None


@dataclass
class SignatureInfo:
    key: str | None
    subgraph: int
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]


@dataclass
class SubgraphInfo:
    index: int
    name: str
    ops: int
    tensors: int


@dataclass
class ModelWarning:
    """Something a GPU user should know, with a stable code."""

    code: str
    message: str
    items: list[str] = field(default_factory=list)


@dataclass
class InspectReport:
    path: str | None
    size_bytes: int | None
    sha256: str | None
    schema_version: int
    description: str | None
    min_runtime_version: str | None
    metadata: list[str]
    subgraphs: list[SubgraphInfo]
    signatures: list[SignatureInfo]
    op_histogram: dict[str, int]
    op_versions: dict[str, list[int]]
    custom_ops: list[str]
    flex_ops: list[str]
    weights_bytes_by_dtype: dict[str, int]
    sparse_tensors: int
    warnings: list[ModelWarning]
    #: STABLEHLO_COMPOSITE ops by the subgraph that calls them (its signature key, else its
    #: name): composite name -> count (litert-torch's odml.rms_norm, ...)
    composites: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def op_count(self) -> int:
        return sum(self.op_histogram.values())

    def to_json(self) -> dict[str, Any]:
        return {"schema": INSPECT_SCHEMA, **plain_fields(self)}
