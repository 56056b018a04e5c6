"""StableHLO composites inlined: each ``STABLEHLO_COMPOSITE`` replaced by its decomposition's ops.

litert-torch wraps known blocks (``odml.rms_norm``, ``odml.scaled_dot_product_attention``,
``odml.group_norm``...) in a composite op whose options name a decomposition subgraph: what a
runtime without a kernel for the composite runs instead. LiteRT 2.3's GPU accelerator dies
(SIGSEGV) compiling these graphs at the first composite, and a composite with no GPU kernel
leaves its decomposition to the CPU; with the decomposition's ops copied in place the GPU takes
them like any other op.

``InlineComposite`` fires on a composite of the main subgraph and inlines every composite of
the same name in every subgraph that is not itself a decomposition (so the ``decode`` signature
too), nested composites (a decomposition holding composites) included. Decomposition subgraphs
nothing references any more are removed, and the subgraph indices other ops name (WHILE, IF,
CALL_ONCE, composites, StableHLO bodies) renumbered. The CPU interpreter's builtin kernels run a
composite by its decomposition, so the proof is bit-identical; XNNPACK has kernels of its own for
some composites, which need not compute the same (docs/llm.md: Gemma's multi-query attention).

``tflkit.rewriter.rules.attention`` repairs a decomposition before it is inlined.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tflkit.compat.reasons import Reason
from tflkit.ir import schema
from tflkit.ir.graph import Model, Op, OpCode, SignatureDef, Subgraph, Tensor
from tflkit.rewriter.contract import Contract
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, replace
from tflkit.rewriter.verify import (
    run_signature,
)

if TYPE_CHECKING:
    import numpy as np

    from tflkit.ir.builder import OpBuilder

COMPOSITE = "STABLEHLO_COMPOSITE"
#: Nesting depth beyond which a decomposition is taken for a cycle.
MAX_DEPTH = 32


# --- reading composites -------------------------------------------------------------------------


def composite_name(op: Op) -> str:
    """The composite's name (``odml.rms_norm``), "" when it has none."""
    name = getattr(op.options2, "name", None) or b""
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)


def decomposition(op: Op) -> Subgraph | None:
    """The subgraph holding ``op``'s decomposition, None when its options name none."""
    import numpy as np

    sg = op.subgraph
    model = sg.model if sg is not None else None
    index = getattr(op.options2, "decompositionSubgraphIndex", None)
    if model is None or not isinstance(index, int | np.integer):
        return None
    return model.subgraphs[int(index)] if 0 <= index < len(model.subgraphs) else None


def decomposition_indices(model: Model) -> set[int]:
    """Indices of the subgraphs some composite names as its decomposition."""
    import numpy as np

    found = set()
    for op in model.iter_ops():
        if op.type == COMPOSITE:
            index = getattr(op.options2, "decompositionSubgraphIndex", None)
            if isinstance(index, int | np.integer) and 0 <= index < len(model.subgraphs):
                found.add(int(index))
    return found


def host_subgraphs(model: Model) -> list[Subgraph]:
    """The subgraphs that run as graphs of their own: the main one, signatures' and control
    flow bodies, i.e. every subgraph no composite names as its decomposition."""
    bodies = decomposition_indices(model) - {0}
    bodies -= {model.subgraphs.index(s.subgraph) for s in model.signatures}
    return [sg for i, sg in enumerate(model.subgraphs) if i not in bodies]


def inline_problem(op: Op, depth: int = 0) -> str | None:
    """Why ``op``'s decomposition cannot be copied in place (None: it can), nested ones too."""
    if getattr(op.options2, "decompositionSubgraphIndex", None) is None:
        return "no StableHLOCompositeOptions (no decomposition subgraph)"
    body = decomposition(op)
    if body is None:
        return "its decomposition subgraph does not exist"
    if body is op.subgraph or depth > MAX_DEPTH:
        return "its decomposition contains itself"
    model = body.model
    assert model is not None
    if model.runs_as_graph(body):
        return "its decomposition is an entry subgraph"
    if len(body.inputs) != len(op.inputs) or len(body.outputs) != len(op.outputs):
        return "its decomposition takes or returns a different number of tensors"
    for outer, inner in zip((*op.inputs, *op.outputs), (*body.inputs, *body.outputs), strict=True):
        if outer is None:
            return "an input is omitted"
        if outer.type != inner.type or (
            outer.shape != inner.shape and not (outer.is_dynamic or inner.is_dynamic)
        ):
            return f"tensor {outer.name!r} differs in type or shape from its decomposition's"
    for inner in body.ops:
        if inner.type == COMPOSITE:
            problem = inline_problem(inner, depth + 1)
            if problem is not None:
                return f"nested {composite_name(inner) or COMPOSITE}: {problem}"
    return None


# --- the transform ------------------------------------------------------------------------------


def inline(op: Op) -> None:
    """Replace ``op`` by a copy of its decomposition's ops (nested composites inlined too)."""
    from tflkit.ir.builder import OpBuilder

    graph, body = op.subgraph, decomposition(op)
    assert graph is not None and body is not None
    prefix = op.outputs[0].name if op.outputs else composite_name(op)
    mapped: dict[int, Tensor] = {
        id(inner): outer for inner, outer in zip(body.inputs, op.inputs, strict=True) if outer
    }
    position = op.index
    clones = []
    for inner in body.ops:
        clone = _clone(inner, graph, mapped, prefix)
        graph.insert_op(position, clone)
        position += 1
        clones.append(clone)
    results = [mapped.get(id(t)) or _fresh(graph, t, mapped, prefix) for t in body.outputs]
    b = OpBuilder(graph, before=op, prefix=prefix)
    outer = {id(t) for t in op.inputs}
    results = [_copy(b, t) if t.producer is None or id(t) in outer else t for t in results]
    replace(op, results)
    for clone in clones:
        if clone.type == COMPOSITE:
            inline(clone)


def _clone(inner: Op, graph: Subgraph, mapped: dict[int, Tensor], prefix: str) -> Op:
    def get(t: Tensor | None) -> Tensor | None:
        return None if t is None else mapped.get(id(t)) or _fresh(graph, t, mapped, prefix)

    return Op(
        inner.opcode,
        [get(t) for t in inner.inputs],
        [get(t) for t in inner.outputs],  # type: ignore[misc]
        options=copy.deepcopy(inner.options),
        options2=copy.deepcopy(inner.options2),
        options2_type=inner.options2_type,
        custom_options=inner.custom_options,
        custom_options_format=inner.custom_options_format,
        mutating_variable_inputs=inner.mutating_variable_inputs,
        intermediates=[t for t in map(get, inner.intermediates) if t is not None],
    )


def _fresh(graph: Subgraph, t: Tensor, mapped: dict[int, Tensor], prefix: str) -> Tensor:
    """A copy of the decomposition's tensor ``t`` in ``graph`` (constants share the buffer)."""
    clone = t.detached_copy(graph.unique_name(f"{prefix}/{t.name}"), t.buffer)
    mapped[id(t)] = graph.add_tensor(clone)
    return clone


def _copy(b: OpBuilder, tensor: Tensor) -> Tensor:
    """``tensor`` again as an op's output (a decomposition returning its input or a constant)."""
    dims = [int(d) for d in tensor.shape]
    opts = options("ReshapeOptions", newShape=dims)
    return b.RESHAPE(tensor, i32(*dims), shape=dims, options=opts, name="copy")


def inline_all(model: Model, name: str | None = None) -> int:
    """Inline every composite (named ``name``, if given) of every host subgraph, then drop the
    decompositions left unreferenced; returns how many composites were inlined (nested ones
    not counted)."""
    bodies = [model.subgraphs[i] for i in decomposition_indices(model)]
    count = 0
    for graph in host_subgraphs(model):
        for op in [o for o in graph.ops if o.type == COMPOSITE]:
            if (name is None or composite_name(op) == name) and inline_problem(op) is None:
                inline(op)
                count += 1
    remove_orphaned(model, bodies)
    return count


# --- subgraph bookkeeping -----------------------------------------------------------------------


def _subgraph_fields(op: Op) -> Iterator[tuple[Any, str]]:
    """(options object, field) for every field of ``op``'s options naming subgraphs."""
    for holder in (op.options, op.options2):
        for attr in getattr(holder, "__dict__", {}):
            if "ubgraph" in attr:
                yield holder, attr


def referenced(model: Model) -> set[int]:
    """Subgraph indices named by any op's options (control flow, composites, StableHLO)."""
    import numpy as np

    found: set[int] = set()
    for op in model.iter_ops():
        for holder, attr in _subgraph_fields(op):
            value = getattr(holder, attr)
            values = value if isinstance(value, list | tuple | np.ndarray) else [value]
            found.update(int(v) for v in values if isinstance(v, int | np.integer))
    return found


def remove_orphaned(model: Model, candidates: Sequence[Subgraph]) -> list[str]:
    """Drop the ``candidates`` (decomposition subgraphs) no op, signature or the main graph
    needs any more, renumbering the subgraph indices ops name; returns their names."""
    removed = []
    ids = {id(sg) for sg in candidates}
    while True:
        keep = referenced(model) | {0}
        keep |= {model.subgraphs.index(s.subgraph) for s in model.signatures}
        orphans = [i for i, sg in enumerate(model.subgraphs) if i not in keep and id(sg) in ids]
        if not orphans:
            return removed
        for index in reversed(orphans):
            removed.append(model.subgraphs[index].name)
            _remove_subgraph(model, index)


def _remove_subgraph(model: Model, index: int) -> None:
    import numpy as np

    del model.subgraphs[index]
    for op in model.iter_ops():
        for holder, attr in _subgraph_fields(op):
            value = getattr(holder, attr)
            if isinstance(value, int | np.integer):
                if value > index:
                    setattr(holder, attr, int(value) - 1)
            elif isinstance(value, list | tuple | np.ndarray):
                setattr(holder, attr, [int(v) - 1 if v > index else int(v) for v in value])


# --- the rule -----------------------------------------------------------------------------------


class InlineComposite(OpRewrite):
    name = "inline_composite"
    summary = (
        "STABLEHLO_COMPOSITE -> its decomposition's ops in place (every composite of that name, "
        "in every signature; nested ones too; LiteRT 2.3's accelerator crashes on composites)"
    )
    fixes = (COMPOSITE,)
    #: static: a composite with no GPU implementation; probe: the accelerator crashed at it
    codes = (Reason.UNSUPPORTED_OP, Reason.CRASH)
    reasons = ("has no GPU implementation", "killed by SIGSEGV")
    contract = Contract(0.0, 0.0, "bit-identical on the builtin CPU kernels (no XNNPACK)")
    required_inputs = ()
    num_outputs = None

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.options2 is not None

    def match(self, op: Op) -> Match:
        return Match.unless(op, inline_problem(op))

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        name = composite_name(op)
        model = op.subgraph.model if op.subgraph is not None else None
        assert model is not None
        bodies = [model.subgraphs[i] for i in decomposition_indices(model)]
        inline(op)
        inline_all(model, name)
        remove_orphaned(model, bodies)

    def runtime_check(
        self, original: bytes, rewritten: bytes, seeds: tuple[int, ...]
    ) -> str | None:
        """The inlined graph computes what XNNPACK's own kernels for the composites compute.

        The CPU proof runs both graphs on the builtin kernels, which run a composite by its
        decomposition: it proves the copy, not the decomposition. XNNPACK has kernels of its
        own for some composites; where its run of the original parts from its run of the
        inlined graph, the decomposition and the kernel compute different things.
        """
        from tflkit import ir

        model = ir.load(original)
        for key, feed in signature_feeds(model, seeds):
            try:
                kernel = run_signature(original, key, feed, kernels="xnnpack")
                inlined = run_signature(rewritten, key, feed, kernels="xnnpack")
            except (RuntimeError, ValueError):
                continue  # the CPU proof ran both on the builtin kernels: nothing to add
            for name, expected in kernel.items():
                parted = _parted(expected, inlined[name])
                if parted is not None:
                    names = ", ".join(sorted(_composite_names(model)))
                    return (
                        f"XNNPACK's own kernels for {names} and their inlined decompositions "
                        f"compute different things: {key}:{name} parts by {parted} on seeded "
                        "random inputs; one of the two is wrong (litert-torch 0.10 writes a "
                        "wrong odml.scaled_dot_product_attention decomposition for one KV head, "
                        "which the default rewrite repairs first: rule attention_key_transpose; "
                        "docs/llm.md), so inlining may change what the model computes"
                    )
        return None

    def examples(self) -> tuple[Example, ...]:
        return (
            Example("rms_norm_two_signatures", rms_norm_example, no_int8=NO_INT8),
            Example("nested_shared_decomposition", nested_example, no_int8=NO_INT8),
        )


#: How far XNNPACK's own kernel for a composite may part from the inlined decomposition, as a
#: fraction of the output's peak: kernels that compute the same thing in another order differ
#: by float rounding (0 on TinyLlama, Qwen and Phi-2; 1e-6 relative is the float32 scale);
#: Gemma's wrong one-KV-head attention decomposition parts by 0.25-0.3 of its peak
#: (tests/test_rule_composite.py).
KERNEL_AGREEMENT = 1e-4


def signature_feeds(
    model: Model, seeds: Sequence[int]
) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """(signature key, seeded random feed by input name) for each signature with static
    inputs, and each seed."""
    from tflkit.errors import UsageError
    from tflkit.ir.feeds import random_feed

    for signature in model.signatures:
        tensors = signature.inputs
        if any(t.is_dynamic for t in tensors.values()):
            continue
        for seed in seeds:
            try:
                by_tensor = random_feed(list(tensors.values()), seed)
            except UsageError:  # an input random values cannot fill (strings...)
                break
            yield signature.key, {name: by_tensor[t.name] for name, t in tensors.items()}


def _parted(expected: np.ndarray, actual: np.ndarray) -> str | None:
    """``"0.87 of a peak of 3.5"`` when the float ``actual`` parts from ``expected`` beyond
    :data:`KERNEL_AGREEMENT`, else None."""
    import numpy as np

    if expected.dtype.kind != "f" or expected.shape != actual.shape or not expected.size:
        return None
    a, b = expected.astype(np.float64), actual.astype(np.float64)
    finite = np.isfinite(a) & np.isfinite(b)
    peak = float(np.abs(a[finite]).max()) if finite.any() else 0.0
    diff = float(np.abs(a - b)[finite].max()) if finite.any() else 0.0
    if diff <= KERNEL_AGREEMENT * max(peak, np.finfo(np.float32).tiny):
        return None
    return f"{diff:.3g} of a peak of {peak:.3g}"


def _composite_names(model: Model) -> set[str]:
    return {composite_name(op) or "(unnamed)" for op in model.iter_ops() if op.type == COMPOSITE}


#: Why the examples have no int8 variant.
NO_INT8 = (
    "example.int8_variant quantizes the main subgraph's activations only: the decomposition "
    "subgraph's stay float32 and its ops refuse the int8 inputs"
)


# --- examples -----------------------------------------------------------------------------------

#: A name the GPU delegate has no kernel for (so the static checker rejects the composite).
EXAMPLE_NAME = "tflkit.example.rms_norm"


def composite_options(name: str, index: int) -> Any:
    o = schema.fb.StableHLOCompositeOptionsT()
    o.name = name.encode()
    o.decompositionSubgraphIndex = index
    o.compositeAttributes = []
    o.compositeAttributesFormat = 0
    o.version = 0
    return o


def composite(
    b: OpBuilder, inputs: Sequence[Tensor], body_index: int, name: str = EXAMPLE_NAME
) -> Tensor:
    """A ``STABLEHLO_COMPOSITE`` named ``name`` over ``inputs`` whose decomposition is
    subgraph ``body_index`` (its output shaped like the first input), appended to ``b``'s
    subgraph (the op builder has no ``options2``)."""
    import numpy as np

    out = b.tensor(inputs[0].shape, np.float32, name=name.rsplit(".", 1)[-1])
    op = Op(
        OpCode.builtin(COMPOSITE),
        list(inputs),
        [out],
        options2=composite_options(name, body_index),
        options2_type=schema.fb.BuiltinOptions2.StableHLOCompositeOptions,
    )
    b.subgraph.add_op(op)
    return out


def rms_norm_body(model: Model, shape: Sequence[int], eps: float = 1e-6) -> int:
    """A decomposition subgraph ``x, w -> x * rsqrt(mean(x * x) + eps) * w`` (last axis);
    returns its index."""
    import numpy as np

    from tflkit.ir.builder import OpBuilder

    body = model.add_subgraph(f"{EXAMPLE_NAME}.impl_{len(model.subgraphs)}")
    x = body.new_tensor("x", shape, np.float32)
    w = body.new_tensor("w", shape[-1:], np.float32)
    b = OpBuilder(body, prefix="rms")
    square = b.MUL(x, x, options=options("MulOptions"), name="square")
    mean = b.MEAN(
        square, i32(len(shape) - 1), shape=(*shape[:-1], 1),
        options=options("ReducerOptions", keepDims=True), name="mean",
    )  # fmt: skip
    norm = b.RSQRT(
        b.ADD(mean, np.array(eps, np.float32), options=options("AddOptions")), name="rsqrt"
    )
    out = b.MUL(b.MUL(x, norm, options=options("MulOptions")), w, options=options("MulOptions"))
    body.inputs, body.outputs = [x, w], [out]
    return body.index


def rms_norm_example() -> Model:
    """An RMS norm composite in the main signature and in a second ``decode``-like signature,
    each with its own decomposition subgraph (as litert-torch writes them)."""
    import numpy as np

    shape = (1, 4, 16)
    weight = np.linspace(0.5, 1.5, shape[-1], dtype=np.float32)

    def body(b: OpBuilder, x: Tensor) -> Tensor:
        model = b.subgraph.model
        assert model is not None
        index = rms_norm_body(model, shape)
        return scale(b, composite(b, [scale(b, x, 3.0), b.const(weight, "w")], index))

    model = graph_model([(shape, np.float32)], body)
    _add_second_signature(model, shape, weight)
    return model


def _add_second_signature(model: Model, shape: Sequence[int], weight: np.ndarray) -> None:
    import numpy as np

    from tflkit.ir.builder import OpBuilder

    graph = model.add_subgraph("decode")
    index = rms_norm_body(model, shape)
    x = graph.new_tensor("x", shape, np.float32)
    b = OpBuilder(graph, prefix="decode")
    out = scale(b, composite(b, [scale(b, x, 2.0), b.const(weight, "w")], index))
    graph.inputs, graph.outputs = [x], [out]
    model.signatures.append(SignatureDef("decode", graph, {"x": x}, {"out0": out}))


def nested_example() -> Model:
    """A composite whose decomposition holds two composites sharing one RMS-norm
    decomposition subgraph (nested and shared)."""
    import numpy as np

    from tflkit.ir.builder import OpBuilder

    shape = (1, 2, 8)
    weight = np.linspace(0.25, 2.0, shape[-1], dtype=np.float32)

    def body(b: OpBuilder, x: Tensor) -> Tensor:
        model = b.subgraph.model
        assert model is not None
        outer = model.add_subgraph("tflkit.example.block.impl")
        inner_index = rms_norm_body(model, shape)
        xi = outer.new_tensor("x", shape, np.float32)
        wi = outer.new_tensor("w", shape[-1:], np.float32)
        ob = OpBuilder(outer, prefix="block")
        first = composite(ob, [xi, wi], inner_index)
        second = composite(ob, [ob.ADD(first, xi, options=options("AddOptions")), wi], inner_index)
        outer.inputs, outer.outputs = [xi, wi], [second]
        y = composite(b, [scale(b, x, 3.0), b.const(weight, "w")], outer.index, "tflkit.block")
        return scale(b, y)

    return graph_model([(shape, np.float32)], body)


#: The example's attention: 3 queries, 4 query heads over one KV head, a cache of 8 positions
#: of 4 dims (8 != 4: the RESHAPE's permutation is unique).
