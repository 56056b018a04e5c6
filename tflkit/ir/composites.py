"""StableHLO composites (``STABLEHLO_COMPOSITE``): what the op is, read from its options.

litert-torch and the ODML converters wrap a known block (an RMS norm, attention, a KV-cache
update) in a composite op: ``BuiltinOptions2`` holds ``StableHLOCompositeOptions`` with the
composite's ``name`` (``odml.rms_norm``...), the subgraph holding its decomposition (what a
runtime without a kernel for that name runs instead), ``composite_attributes`` (a flexbuffer) and
a ``version``. :func:`composite_of` reads them; :data:`MEANINGS` says what each name is in words
a user knows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["MEANINGS", "CompositeInfo", "composite_of", "describe"]

#: What the composites litert-torch 0.10 emits compute.
MEANINGS = {
    "odml.rms_norm": "RMS normalization, x / sqrt(mean(x^2) + eps) * scale",
    "odml.group_norm": "group normalization (litert-torch writes layer norm as one group)",
    "odml.layer_norm": "layer normalization",
    "odml.scaled_dot_product_attention": (
        "attention: softmax(Q K^T * scale + mask) V over the KV cache"
    ),
    "odml.update_kv_cache": "writes this step's keys and values into the KV cache",
    "odml.update_external_kv_cache": "writes this step's keys and values into the KV cache",
    "odml.embedding_lookup": "token embedding lookup",
    "odml.gelu": "GELU activation",
}


@dataclass(frozen=True)
class CompositeInfo:
    """One composite op: its name, decomposition subgraph, version and what it computes."""

    name: str
    decomposition_subgraph: int | None
    version: int
    meaning: str


def describe(name: str) -> str:
    """``name`` and what it computes, e.g. ``odml.rms_norm (RMS normalization, ...)``."""
    meaning = MEANINGS.get(name)
    return f"{name} ({meaning})" if meaning else name


def composite_of(op: Any) -> CompositeInfo | None:
    """The composite an ``ir.Op`` is, or None when it is no ``STABLEHLO_COMPOSITE``."""
    if op.type != "STABLEHLO_COMPOSITE":
        return None
    fields = op.option_fields  # StableHLOCompositeOptions, in BuiltinOptions2
    name = fields.get("name") or b""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    index = fields.get("decompositionSubgraphIndex")
    return CompositeInfo(
        name=name or "(unnamed)",
        decomposition_subgraph=None if index is None else int(index),
        version=int(fields.get("version") or 0),
        meaning=MEANINGS.get(name, "not a composite tflkit knows"),
    )
