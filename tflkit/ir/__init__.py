"""Editable TFLite graph: load a ``.tflite`` into objects, edit it, save it back losslessly."""

from tflkit.ir import schema
from tflkit.ir.graph import Buffer, Metadata, Model, Op, OpCode, SignatureDef, Subgraph, Tensor
from tflkit.ir.serde import dumps, load, save

__all__ = [
    "Buffer",
    "Metadata",
    "Model",
    "Op",
    "OpCode",
    "SignatureDef",
    "Subgraph",
    "Tensor",
    "dumps",
    "load",
    "save",
    "schema",
]
