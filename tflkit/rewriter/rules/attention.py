"""litert-torch 0.10's one-KV-head attention decomposition repaired: rule ``AttentionKeyTranspose``.

litert-torch 0.10 writes the ``odml.scaled_dot_product_attention`` decomposition for one KV head
with the keys "transposed" by a RESHAPE, right only when a moved axis is 1. The rule makes it
the TRANSPOSE it stands for, before ``inline_composite`` inlines it, and proves the result
against XNNPACK's own attention kernel (the builtin kernels ran the wrong decomposition, so they
cannot be the proof).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tflkit.ir import schema
from tflkit.ir.graph import Model, Op, OpCode, Subgraph, Tensor
from tflkit.rewriter.contract import Contract
from tflkit.rewriter.example import graph_model, i32, options, scale
from tflkit.rewriter.rule import Example, Match, OpRewrite, OwnProof, replace
from tflkit.rewriter.rules.composite import (
    COMPOSITE,
    KERNEL_AGREEMENT,
    NO_INT8,
    InlineComposite,
    composite_name,
    composite_options,
    decomposition,
    signature_feeds,
)
from tflkit.rewriter.verify import (
    OutputCheck,
    Verification,
    conclude,
    first_line,
    keep_worst,
    run_signature,
    verify,
)

if TYPE_CHECKING:
    import numpy as np

    from tflkit.ir.builder import OpBuilder

# --- the attention decomposition repaired ---------------------------------------------------------

#: litert-torch's attention composite (inputs Q, K, V, mask; attribute ``scale``).
SDPA = "odml.scaled_dot_product_attention"


def axis_permutation(src: Sequence[int], dst: Sequence[int]) -> tuple[int, ...] | str | None:
    """The transpose a RESHAPE from ``src`` to ``dst`` stands for when it reorders non-unit
    axes (the same dims as multisets, the non-unit ones in another order); a str when the dims
    match but two non-unit axes have the same length (which transpose is meant cannot be told);
    None when the RESHAPE reorders no data (a plain reshape)."""
    src, dst = [int(d) for d in src], [int(d) for d in dst]
    if len(src) != len(dst) or sorted(src) != sorted(dst) or src == dst:
        return None
    moved = [d for d in src if d != 1]
    if len(set(moved)) != len(moved):
        return (
            f"RESHAPE {src} -> {dst}: two non-unit axes have the same length, so which "
            "transpose it stands for (if any) is ambiguous"
        )
    if moved == [d for d in dst if d != 1]:
        return None  # only unit axes move: a reshape and a transpose alike
    units = iter(i for i, d in enumerate(src) if d == 1)
    return tuple(src.index(d) if d != 1 else next(units) for d in dst)


def attention_bodies(model: Model) -> list[Subgraph]:
    """The decomposition subgraphs of the model's ``odml.scaled_dot_product_attention``
    composites, each once (composites may share one), in index order."""
    found = {
        body.index: body
        for op in model.iter_ops()
        if op.type == COMPOSITE and composite_name(op) == SDPA
        for body in [decomposition(op)]
        if body is not None
    }
    return [found[i] for i in sorted(found)]


def permuting_reshapes(body: Subgraph) -> list[tuple[Op, tuple[int, ...] | str]]:
    """The RESHAPEs of ``body`` that reorder non-unit axes, with the transpose each stands for
    (or why that is ambiguous)."""
    found = []
    for op in body.ops:
        if op.type == "RESHAPE" and op.inputs and op.inputs[0] is not None and op.outputs:
            perm = axis_permutation(op.inputs[0].shape, op.outputs[0].shape)
            if perm is not None:
                found.append((op, perm))
    return found


def repair_problem(model: Model) -> str | None:
    """Why the model's attention decompositions cannot be repaired (None: they can)."""
    found = [
        (body, op, perm)
        for body in attention_bodies(model)
        for op, perm in permuting_reshapes(body)
    ]
    for body, op, perm in found:
        if isinstance(perm, str):
            return f"{perm} (op {op.index} of decomposition subgraph {body.index})"
    if not found:
        return f"no {SDPA} decomposition holds a RESHAPE that reorders non-unit axes"
    return None


def repair_attention(model: Model) -> int:
    """Replace every RESHAPE that reorders non-unit axes in the model's attention
    decompositions by the TRANSPOSE it stands for; returns how many (ambiguous ones kept)."""
    from tflkit.ir.builder import OpBuilder

    count = 0
    for body in attention_bodies(model):
        for op, perm in permuting_reshapes(body):
            if isinstance(perm, str):
                continue
            b = OpBuilder(body, before=op, prefix=f"{op.outputs[0].name}/transposed")
            moved = b.TRANSPOSE(
                op.inputs[0], i32(*perm), shape=op.outputs[0].shape,
                options=options("TransposeOptions"), name="transpose",
            )  # fmt: skip
            replace(op, [moved])
            count += 1
    return count


def _renewed(op: Op) -> None:
    """Retire ``op`` for an identical op (the pass manager wants the op a rule fired on gone)."""
    graph = op.subgraph
    assert graph is not None
    outputs = [
        graph.add_tensor(t.detached_copy(graph.unique_name(f"{t.name}/repaired"), None))
        for t in op.outputs
    ]
    twin = Op(
        op.opcode, list(op.inputs), outputs,
        options=copy.deepcopy(op.options), options2=copy.deepcopy(op.options2),
        options2_type=op.options2_type,
    )  # fmt: skip
    graph.insert_op(op.index, twin)
    replace(op, outputs)


class AttentionKeyTranspose(OpRewrite, OwnProof):
    name = "attention_key_transpose"
    summary = (
        "odml.scaled_dot_product_attention whose decomposition 'transposes' the keys with a "
        "RESHAPE (litert-torch 0.10, one KV head) -> that RESHAPE made the TRANSPOSE it stands "
        "for; proven against XNNPACK's own attention kernel"
    )
    fixes = (COMPOSITE,)
    #: gated as InlineComposite is: the static table rejects odml.* composites as CRASH
    codes = InlineComposite.codes
    reasons = InlineComposite.reasons
    contract = Contract(
        0.0,
        KERNEL_AGREEMENT,
        "changes what the builtin kernels compute: agrees with XNNPACK's own attention kernel "
        "within 1e-4 of each output's peak",
    )
    required_inputs = ()
    num_outputs = None

    def pattern(self, op: Op) -> bool:
        return super().pattern(op) and op.options2 is not None and composite_name(op) == SDPA

    def match(self, op: Op) -> Match:
        model = op.subgraph.model if op.subgraph is not None else None
        if decomposition(op) is None or model is None:
            return Match.fail("no decomposition subgraph")
        return Match.unless(op, repair_problem(model))

    def rewrite(self, match: Match, b: OpBuilder) -> None:
        op = match.op
        assert op.subgraph is not None and op.subgraph.model is not None
        repair_attention(op.subgraph.model)
        _renewed(op)

    def verify_rewrite(
        self, original: bytes, rewritten: bytes, contract: Contract, seeds: tuple[int, ...]
    ) -> Verification:
        return verify_against_kernel(original, rewritten, _without(contract, self.contract), seeds)

    def examples(self) -> tuple[Example, ...]:
        return (Example("one_kv_head_attention", attention_example, no_int8=NO_INT8),)


#: The kernels the rewritten model must agree with the oracle on: XNNPACK (the CPU's default)
#: and the builtin kernels (the CPU side of every GPU comparison; they ran the wrong
#: decomposition before).
PROOF_KERNELS = ("xnnpack", "builtin")


def verify_against_kernel(
    original: bytes,
    rewritten: bytes,
    rest: Contract,
    seeds: Sequence[int],
    oracle: str = "xnnpack",
) -> Verification:
    """The proof of :class:`AttentionKeyTranspose`, in two parts, every signature, seeded
    random inputs.

    1. The rest of the rewrite (the composites inlined, ...) against the original with only its
       attention decompositions repaired, on the builtin kernels, under ``rest`` (the other
       fired rules' contract): :func:`~tflkit.rewriter.verify.verify`.
    2. The original run on XNNPACK, whose own kernel for the composite is the oracle, against
       the rewritten model on XNNPACK and on the builtin kernels, within
       :data:`KERNEL_AGREEMENT` of each output's peak. When XNNPACK ran the original's
       attention by its decomposition too (its outputs equal the builtin kernels' bit for bit)
       while the rewrite changed them, there is no oracle and the proof fails.

    ``oracle`` names the CPU kernels asked for the composite's own kernel (``xnnpack``; the
    builtin and reference kernels have none: the tests ask them, to see the proof fail).
    """
    from tflkit import ir

    repaired = ir.load(original)
    repair_attention(repaired)
    verdict = verify(ir.dumps(repaired), rewritten, rest, seeds=seeds)
    verdict.contract = (
        f"{rest.describe()} against the original with its attention repaired (builtin "
        f"kernels); within {KERNEL_AGREEMENT:g} of each output's peak of XNNPACK's own {SDPA} "
        "kernel on the original, on XNNPACK and on the builtin kernels"
    )
    if not verdict.ok:
        verdict.problem = f"the rewrite besides the attention repair: {verdict.problem}"
        return verdict
    worst = {check.name: check for check in verdict.outputs}
    problem = _against_oracle(ir.load(original), original, rewritten, seeds, worst, oracle)
    if problem is not None:
        verdict.ok, verdict.problem = False, problem
        verdict.outputs = list(worst.values())
        return verdict
    return conclude(verdict, worst, f"(XNNPACK's own {SDPA} kernel the oracle)")


def _against_oracle(
    model: Model,
    original: bytes,
    rewritten: bytes,
    seeds: Sequence[int],
    worst: dict[str, OutputCheck],
    oracle: str,
) -> str | None:
    """Part 2 of :func:`verify_against_kernel`: keeps the worst check per output and kernels in
    ``worst``; returns why there is no proof (None: the checks decide)."""
    import numpy as np

    who = "XNNPACK" if oracle == "xnnpack" else f"the {oracle} kernels"
    own_kernel = changed = False
    for key, feed in signature_feeds(model, seeds):
        try:
            truth = run_signature(original, key, feed, kernels=oracle)
            decomposed = run_signature(original, key, feed)
        except (RuntimeError, ValueError) as exc:
            return f"signature {key!r} of the original does not run on {who} ({first_line(exc)})"
        own_kernel |= any(not np.array_equal(truth[k], decomposed[k]) for k in truth)
        for kernels in PROOF_KERNELS:
            try:
                got = run_signature(rewritten, key, feed, kernels=kernels)
            except (RuntimeError, ValueError) as exc:
                return f"signature {key!r} of the rewritten model does not run ({first_line(exc)})"
            if kernels == "builtin":
                changed |= any(not np.array_equal(decomposed[k], got[k]) for k in decomposed)
            for name, expected in truth.items():
                label = f"{key}:{name} ({kernels} vs {who}'s kernel)"
                keep_worst(worst, {label: expected}, {label: got[name]}, _peak_bound(expected))
    if changed and not own_kernel:
        return (
            f"no oracle: {who} ran the original's {SDPA} by its decomposition (bit-identical "
            "to the builtin kernels), not with a kernel of its own, so nothing proves the "
            "repaired decomposition right"
        )
    return None


def _peak_bound(expected: np.ndarray) -> Contract:
    """:data:`KERNEL_AGREEMENT` of ``expected``'s peak as an absolute bound (0: exact)."""
    import numpy as np

    finite = expected[np.isfinite(expected)] if expected.dtype.kind == "f" else expected
    peak = float(np.abs(finite.astype(np.float64)).max()) if finite.size else 0.0
    return Contract(KERNEL_AGREEMENT * peak, 0.0, "XNNPACK's own kernel")


def _without(contract: Contract, own: Contract) -> Contract:
    """``contract`` (the fired rules' combined one) less ``own``'s bounds: the other rules'."""
    max_abs = max(contract.max_abs - own.max_abs, 0.0)
    max_rel = max(contract.max_rel - own.max_rel, 0.0)
    if max_abs == 0.0 and max_rel == 0.0:
        return Contract()
    return Contract(max_abs, max_rel, contract.note)


# --- examples -----------------------------------------------------------------------------------


ATTENTION = {"queries": 3, "heads": 4, "cache": 8, "dim": 4}


def _sdpa_attributes(scale_value: float) -> list[int]:
    """The composite's flexbuffer attributes ``{"scale": scale_value}``, as litert-torch
    writes them (XNNPACK's kernel reads the scale there)."""
    from flatbuffers import flexbuffers

    return list(flexbuffers.Dumps({"scale": float(scale_value)}))


def attention_body(model: Model, *, queries: int, heads: int, cache: int, dim: int) -> int:
    """A decomposition subgraph of ``odml.scaled_dot_product_attention`` for one KV head, op
    for op as litert-torch 0.10 writes it (gemma's ``prefill_8``), keys "transposed" from
    ``[1, S, 1, D]`` to ``[1, 1, D, S]`` by a RESHAPE; returns its index."""
    import numpy as np

    from tflkit.ir.builder import OpBuilder

    body = model.add_subgraph(f"{SDPA}.impl_{len(model.subgraphs)}")
    q = body.new_tensor("q", (1, queries, heads, dim), np.float32)
    k = body.new_tensor("k", (1, cache, 1, dim), np.float32)
    v = body.new_tensor("v", (1, cache, 1, dim), np.float32)
    mask = body.new_tensor("mask", (1, 1, queries, cache), np.float32)
    b = OpBuilder(body, prefix="sdpa")
    root = np.array(dim**-0.25, np.float32)  # scale 1/sqrt(D), half on Q, half on K
    mul, reshape_to = options("MulOptions"), lambda x, *s: _reshape(b, x, s)
    values = reshape_to(v, cache, dim)
    qh = b.TRANSPOSE(
        b.MUL(q, root, options=mul), i32(0, 2, 1, 3), shape=(1, heads, queries, dim),
        options=options("TransposeOptions"),
    )  # fmt: skip
    keys = reshape_to(b.MUL(k, root, options=mul), 1, 1, dim, cache)  # the converter's bug
    keys = b.BROADCAST_TO(keys, i32(1, heads, dim, cache), shape=(1, heads, dim, cache), version=2)
    logits = b.BATCH_MATMUL(
        reshape_to(qh, heads, queries, dim), reshape_to(keys, heads, dim, cache),
        shape=(heads, queries, cache), options=options("BatchMatMulOptions"),
    )  # fmt: skip
    probs = b.SOFTMAX(
        b.ADD(logits, mask, shape=(1, heads, queries, cache), options=options("AddOptions")),
        options=options("SoftmaxOptions", beta=1.0),
    )  # fmt: skip
    out = b.BATCH_MATMUL(
        reshape_to(probs, heads, queries, cache), values, shape=(heads, queries, dim),
        options=options("BatchMatMulOptions"),
    )  # fmt: skip
    out = b.TRANSPOSE(
        reshape_to(out, 1, heads, queries, dim), i32(0, 2, 1, 3), shape=(1, queries, heads, dim),
        options=options("TransposeOptions"), name="out",
    )  # fmt: skip
    body.inputs, body.outputs = [q, k, v, mask], [out]
    return body.index


def _reshape(b: OpBuilder, x: Tensor, shape: Sequence[int]) -> Tensor:
    dims = [int(d) for d in shape]
    return b.RESHAPE(x, i32(*dims), shape=dims, options=options("ReshapeOptions", newShape=dims))


def attention_example(**sizes: int) -> Model:
    """One ``odml.scaled_dot_product_attention`` composite (Q, K, V, additive mask in; one KV
    head) over the wrong decomposition of :func:`attention_body`, sizes ``ATTENTION``."""
    import numpy as np

    size = {**ATTENTION, **sizes}
    n, t, s, d = size["heads"], size["queries"], size["cache"], size["dim"]
    shapes = [(1, t, n, d), (1, s, 1, d), (1, s, 1, d), (1, 1, t, s)]

    def body(b: OpBuilder, *xs: Tensor) -> Tensor:
        model = b.subgraph.model
        assert model is not None
        index = attention_body(model, **size)
        out = b.tensor(shapes[0], np.float32, name="attention")
        o = composite_options(SDPA, index)
        o.compositeAttributes = _sdpa_attributes(d**-0.5)
        b.subgraph.add_op(
            Op(
                OpCode.builtin(COMPOSITE), [scale(b, x) for x in xs], [out], options2=o,
                options2_type=schema.fb.BuiltinOptions2.StableHLOCompositeOptions,
            )
        )  # fmt: skip
        return scale(b, out)

    return graph_model([(shape, np.float32) for shape in shapes], body)


def attention_reference(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray
) -> np.ndarray:
    """Correct attention in numpy (float64): ``softmax(Q K^T / sqrt(D) + mask) V`` per query
    head over the one KV head; Q ``[1, T, N, D]``, K and V ``[1, S, 1, D]``, mask
    ``[1, 1, T, S]``; returns ``[1, T, N, D]``."""
    import numpy as np

    q64, k64, v64 = (np.asarray(a, np.float64) for a in (q, k, v))
    logits = np.einsum("btnd,bsd->bnts", q64, k64[:, :, 0]) / np.sqrt(q.shape[-1])
    logits = logits + np.asarray(mask, np.float64)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return np.einsum("bnts,bsd->btnd", probs, v64[:, :, 0])
