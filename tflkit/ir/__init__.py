"""Editable TFLite graph: load a ``.tflite`` into objects, edit it, save it back losslessly."""

from tflkit.ir import schema
from tflkit.ir.extract import extract_model
from tflkit.ir.graph import Buffer, Metadata, Model, Op, OpCode, SignatureDef, Subgraph, Tensor
from tflkit.ir.graph_edits import remove_unused, topological_sort
from tflkit.ir.serde import dumps, load, save
from tflkit.ir.verify import check_model, verify_model

__all__ = [
    "Buffer",
    "Metadata",
    "Model",
    "Op",
    "OpCode",
    "SignatureDef",
    "Subgraph",
    "Tensor",
    "check_model",
    "dumps",
    "extract_model",
    "load",
    "remove_unused",
    "save",
    "schema",
    "topological_sort",
    "verify_model",
]
