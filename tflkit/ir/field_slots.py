"""Schema facts the binary readers share, from the generated ``schema_layout`` (no
hand-copied slot numbers): each table field's vtable slot, kind and element size, and the slot
numbers of the fields the verifier and the reader read, by name (``slots().Tensor_Shape``).
"""

from __future__ import annotations

import functools

from tflkit.ir import schema, schema_layout

#: Element size of each ``struct`` code of ``schema_layout``, and its little-endian reader.
SIZES = {"?": 1, "b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "I": 4, "f": 4, "q": 8, "Q": 8, "d": 8}


@functools.cache
def fields(table: str) -> dict[str, tuple[int, str, int]]:
    """Field name -> (slot, kind, element size) of schema table ``table``.

    kind is ``scalar`` (size in bytes), ``struct``, ``string``, ``offset`` (table or union) or
    ``vector`` (element size in bytes; 4 for vectors of tables or strings).
    """
    found: dict[str, tuple[int, str, int]] = {}
    for field, slot, kind, code, _attribute, _default in schema_layout.TABLES.get(table, ()):
        if kind in ("table", "union"):
            found[field] = (slot, "offset", 4)
        elif kind == "string":
            found[field] = (slot, "string", 1)
        elif kind == "struct":
            found[field] = (slot, "struct", 0)
        else:
            found[field] = (slot, kind, SIZES.get(code, 4))
    return found


@functools.cache
def field_checks(
    table: str,
) -> tuple[tuple[tuple[str, int, int], ...], tuple[tuple[str, int, str, int], ...]]:
    """The fields of ``table`` to check: scalars (field, slot, size), then the rest (field,
    slot, kind, element size)."""
    found = fields(table).items()
    scalars = tuple((f, at, size) for f, (at, kind, size) in found if kind == "scalar")
    others = tuple((f, at, kind, size) for f, (at, kind, size) in found if kind != "scalar")
    return scalars, others


def slot(table: str, field: str) -> int:
    return fields(table)[field][0]


@functools.cache
def subgraph_fields(table: str) -> tuple[tuple[str, int, str], ...]:
    """(field, slot, kind) of the fields of an options table that name subgraphs."""
    return tuple(
        (name, at, kind)
        for name, (at, kind, _) in fields(table).items()
        if name.endswith(("SubgraphIndex", "SubgraphIndices"))
    )


@functools.cache
def own_options(code: int, union: str) -> int | None:
    """The options type of op ``code`` when the schema names one after the op (CONV_2D ->
    Conv2DOptions, SOFTMAX -> SoftmaxOptions); None for ops that share or lack one."""
    camel = "".join(part[:1] + part[1:].lower() for part in schema.op_name(code).split("_"))
    wanted = f"{camel}Options".lower()
    matches = [v for v, name in schema.enum_names(union).items() if name.lower() == wanted]
    return matches[0] if len(matches) == 1 else None


@functools.cache
def enum_values(enum: str) -> frozenset[int]:
    return frozenset(schema.enum_names(enum))


#: The fields the verifier and the reader read, by table.
READ_FIELDS = (
    (
        "Model",
        "Version OperatorCodes Subgraphs Description Buffers MetadataBuffer Metadata "
        "SignatureDefs ExternalBufferGroups ExternalBuffers",
    ),
    ("OperatorCode", "DeprecatedBuiltinCode BuiltinCode CustomCode Version"),
    ("Buffer", "Data Offset Size"),
    ("Metadata", "Name Buffer"),
    ("SubGraph", "Tensors Inputs Outputs Operators Name DebugMetadataIndex"),
    (
        "Tensor",
        "Shape Type Buffer Name Quantization Sparsity ShapeSignature IsVariable HasRank "
        "VariantTensors ExternalBuffer",
    ),
    (
        "Operator",
        "OpcodeIndex Inputs Outputs BuiltinOptionsType BuiltinOptions CustomOptions "
        "MutatingVariableInputs Intermediates LargeCustomOptionsOffset LargeCustomOptionsSize "
        "BuiltinOptions2Type BuiltinOptions2 CustomOptionsFormat DebugMetadataIndex",
    ),
    ("QuantizationParameters", "DetailsType Details"),
    ("SignatureDef", "Inputs Outputs SignatureKey SubgraphIndex"),
    ("TensorMap", "Name TensorIndex"),
)


class Slots:
    """The slot numbers of ``READ_FIELDS``, looked up once from the generated schema, as
    attributes named ``<Table>_<Field>`` (``Tensor_Shape``)."""

    def __init__(self) -> None:
        for table, names in READ_FIELDS:
            for name in names.split():
                setattr(self, f"{table}_{name}", slot(table, name))


@functools.cache
def slots() -> Slots:
    return Slots()
