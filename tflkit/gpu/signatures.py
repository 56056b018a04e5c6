"""A signature of a model as a standalone model, and the order signatures are probed in."""

from __future__ import annotations

from typing import Any


def signature_model(model: Any, key: str) -> tuple[bytes, dict[str, str]]:
    """Signature ``key`` of ``model`` (an ``ir.Model``) as a standalone model: its subgraph as
    subgraph 0 (the subgraphs its ops name, such as composites' decompositions, copied along;
    op indices unchanged), and its signature input names -> the standalone model's (tensor
    names).

    The probe's crash bisection and localization work on subgraph 0, so a signature that is
    not subgraph 0 (``decode`` of an LLM graph) goes through this. A zero-element tensor with no
    producer that the signature does not take (an empty constant, e.g. the shape of a RESHAPE to
    a scalar) stays in the graph, not an input: the accelerator cannot bind an empty input.
    """
    from tflkit import ir

    signature = model.signature(key)
    sub = ir.extract_model(signature.subgraph.ops, signature_key=key)
    graph, sig = sub.main, sub.signatures[0]
    taken = {t.name for t in signature.inputs.values()}
    empty = {id(t) for t in graph.inputs if 0 in tuple(t.shape) and t.name not in taken}
    graph.inputs = [t for t in graph.inputs if id(t) not in empty]
    sig.inputs = {k: t for k, t in sig.inputs.items() if id(t) not in empty}
    kept = {t.name for t in graph.inputs}
    names = {k: t.name for k, t in signature.inputs.items() if t.name in kept}
    return ir.dumps(sub), names


def signature_order(model: Any) -> list[str]:
    """``model``'s signature keys, an LLM graph's ``decode`` first (the one that runs once per
    token), the others in file order."""
    keys = [s.key for s in model.signatures]
    first = [k for k in keys if k == "decode" or k.startswith("decode_")]
    return first + [k for k in keys if k not in first]
