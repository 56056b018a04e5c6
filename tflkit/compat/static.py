"""Static GPU compatibility: which ops a target will not take and why, without running anything.

``check_op`` answers for one op, ``op_verdicts`` for every op of every subgraph, and
``model_issues`` lists what concerns the graph as a whole (fatal rejections that make GPU
compilation fail, inputs with dynamic dimensions); ``analyze`` gives verdicts and issues in one
``StaticReport``. What the runtime does, measured on the LiteRT
accelerator and encoded here:

* every subgraph gets the delegate on its own, IF/WHILE bodies and CALL_ONCE initializers
  included (each prints its own rejection block when the model is compiled);
* fp16 weights behind DEQUANTIZE are folded into the GPU graph only when the whole subgraph is
  delegated; otherwise those DEQUANTIZE ops stay on the CPU;
* an op whose output shape comes from runtime data makes the whole compilation fail.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from tflkit import ir
from tflkit.compat.cpu_kernels import cpu_kernel_hazards
from tflkit.compat.custom_ops import known_custom
from tflkit.compat.reasons import Reason, Rejection, reject
from tflkit.compat.signature import OpSignature, TensorSig
from tflkit.compat.targets import DEFAULT_TARGET, Target, get_target
from tflkit.compat.targets.common import (
    OpRule,
    activation_rejection,
    data_dependent_shape,
    empty_tensor,
    tensor_rejections,
    variable_tensor,
)

CONTROL_FLOW_OPS = frozenset({"IF", "WHILE", "CALL", "STABLEHLO_WHILE", "STABLEHLO_CASE"})
RESOURCE_OPS = frozenset(
    {
        "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "CALL_ONCE", "HASHTABLE",
        "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_SIZE", "HASHTABLE_LOOKUP",
    }
)  # fmt: skip

ModelLike = ir.Model | bytes | str | os.PathLike[str]


@dataclass(frozen=True)
class OpVerdict:
    """The verdict on one op: ``ok`` when the target takes it."""

    subgraph_index: int
    op_index: int
    op_type: str
    ok: bool
    rejections: tuple[Rejection, ...] = ()
    #: "main", "signature" (another entry point), "body" (IF/WHILE/CALL_ONCE target, delegated
    #: as a graph of its own) or "decomposition" (StableHLO composite body).
    subgraph_role: str = "main"

    @property
    def fatal(self) -> bool:
        return any(r.fatal for r in self.rejections)

    @property
    def placed(self) -> bool:
        """The accelerator takes the op: ``ok``, or rejected only for values it computes wrong
        (``WRONG_RESULT``: placed on the GPU all the same)."""
        wrong_only = all(r.code == Reason.WRONG_RESULT for r in self.rejections)
        return self.ok or (bool(self.rejections) and wrong_only)

    @property
    def codes(self) -> tuple[Reason, ...]:
        return tuple(r.code for r in self.rejections)

    def to_dict(self) -> dict[str, object]:
        return {
            "subgraph": self.subgraph_index,
            "op_index": self.op_index,
            "op_type": self.op_type,
            "ok": self.ok,
            "subgraph_role": self.subgraph_role,
            "rejections": [r.to_dict() for r in self.rejections],
        }


@dataclass(frozen=True)
class ModelIssue:
    """Something about the whole graph: fatal rejections, dynamic inputs."""

    code: Reason
    message: str
    subgraph_index: int
    op_index: int | None = None
    fatal: bool = False

    def to_dict(self) -> dict[str, object]:
        return {
            "code": str(self.code),
            "message": self.message,
            "subgraph": self.subgraph_index,
            "op_index": self.op_index,
            "fatal": self.fatal,
        }


@dataclass(frozen=True)
class StaticReport:
    """Per-op verdicts and graph-level issues for one target."""

    target: str
    verdicts: tuple[OpVerdict, ...]
    issues: tuple[ModelIssue, ...] = field(default=())

    @property
    def compiles(self) -> bool:
        """False when some issue makes GPU compilation fail as a whole."""
        return not any(issue.fatal for issue in self.issues)

    @property
    def rejected(self) -> tuple[OpVerdict, ...]:
        return tuple(v for v in self.verdicts if not v.ok)

    def to_dict(self) -> dict[str, object]:
        return {
            "target": self.target,
            "compiles": self.compiles,
            "ops": len(self.verdicts),
            "rejected": len(self.rejected),
            "verdicts": [v.to_dict() for v in self.verdicts],
            "issues": [i.to_dict() for i in self.issues],
        }


# --- one op ---------------------------------------------------------------------------------


def check_signature(sig: OpSignature, target: str | Target = DEFAULT_TARGET) -> list[Rejection]:
    """Every reason ``target`` rejects the op described by ``sig`` (empty when it takes it)."""
    tgt = get_target(target)
    found: list[Rejection] = []
    for whole_graph in (
        data_dependent_shape,
        variable_tensor if tgt.variable_tensors_fatal else None,
    ):
        rejection = whole_graph(sig) if whole_graph is not None else None
        if rejection is not None:
            found.append(rejection)
    rule = _rule_or_rejection(sig, tgt, found)
    if rule is None:
        return _dedupe(found)
    if sig.op_type in tgt.const_folded and sig.present_inputs and not sig.runtime_inputs:
        return _dedupe(found)
    if rule.max_version is not None and sig.version > rule.max_version:
        found.append(
            reject(
                Reason.OP_VERSION,
                sig.op_type,
                f"It is version {sig.version}; the delegate takes up to {rule.max_version}.",
            )
        )
    for check in rule.checks:
        rejection = check(sig)
        if rejection is not None:
            found.append(rejection)
    activation = activation_rejection(sig, rule)
    if activation is not None:
        found.append(activation)
    if not rule.skip_tensor_checks:
        found.extend(tensor_rejections(sig, rule, tgt))
    if not found:
        empty = empty_tensor(sig)
        if empty is not None:
            found.append(empty)
    return _dedupe(found)


def check_op(op: ir.Op, target: str | Target = DEFAULT_TARGET) -> list[Rejection]:
    """Every reason ``target`` rejects ``op``, each carrying the op's index in its subgraph."""
    index = op.index if op.subgraph is not None else None
    return _check_op(op, index, get_target(target), {})


def _check_op(
    op: ir.Op, index: int | None, target: Target, tensors: dict[int, TensorSig]
) -> list[Rejection]:
    """``check_op`` for op ``index``; ``tensors`` memoizes tensor signatures across ops."""
    rejections = check_signature(OpSignature.from_op(op, tensors), target)
    return [replace(r, op_index=index) for r in rejections]


def _rule_or_rejection(sig: OpSignature, target: Target, found: list[Rejection]) -> OpRule | None:
    if sig.is_flex:
        detail = (
            "The LiteRT runtime here has no Flex delegate, so the model does not load."
            if target.flex_fatal
            else ""
        )
        found.append(reject(Reason.FLEX_OP, sig.op_type, detail, fatal=target.flex_fatal))
        return None
    if sig.is_custom:
        rule = target.custom_rules.get(sig.custom_code or "")
        known = known_custom(sig.custom_code or "", sig.op_type) if rule is None else None
        if known is not None:
            found.append(known)
        elif rule is None:
            detail = (
                "Unless the app registers a CPU kernel for it, the model does not load."
                if target.unknown_custom_fatal
                else ""
            )
            found.append(
                reject(Reason.CUSTOM_OP, sig.op_type, detail, fatal=target.unknown_custom_fatal)
            )
        return rule
    rule = target.rules.get(sig.op_type)
    if rule is None:
        if sig.op_type in CONTROL_FLOW_OPS:
            code = Reason.CONTROL_FLOW
        elif sig.op_type in RESOURCE_OPS:
            code = Reason.RESOURCE_VARIABLE
        else:
            code = Reason.UNSUPPORTED_OP
        found.append(reject(code, sig.op_type))
    return rule


def _dedupe(rejections: list[Rejection]) -> list[Rejection]:
    seen: set[tuple[Reason, str]] = set()
    unique = []
    for r in rejections:
        if (r.code, r.message) not in seen:
            seen.add((r.code, r.message))
            unique.append(r)
    return unique


# --- whole model ----------------------------------------------------------------------------


def subgraph_roles(model: ir.Model) -> dict[int, str]:
    """Why each subgraph exists: main, signature, body or decomposition."""
    roles = {i: "body" for i in range(len(model.subgraphs))}
    for op in model.iter_ops():
        for field_name, index in op.referenced_subgraphs.items():
            if index in roles and field_name == "decompositionSubgraphIndex":
                roles[index] = "decomposition"
    for signature in model.signatures:
        roles[signature.subgraph.index] = "signature"
    if roles:
        roles[0] = "main"
    return roles


def op_verdicts(model: ModelLike, target: str | Target = DEFAULT_TARGET) -> list[OpVerdict]:
    """A verdict for every op of every subgraph, in subgraph then execution order."""
    graph = _as_model(model)
    return _verdicts(graph, get_target(target), subgraph_roles(graph))


def _verdicts(graph: ir.Model, tgt: Target, roles: dict[int, str]) -> list[OpVerdict]:
    verdicts: list[OpVerdict] = []
    for sg_index, subgraph in enumerate(graph.subgraphs):
        tensors: dict[int, TensorSig] = {}  # each tensor's signature, shared by its ops
        rejections = [
            _check_op(op, i, tgt, tensors) + _while_with_dynamic_body(op)
            for i, op in enumerate(subgraph.ops)
        ]
        rejections = _fp16_dequantize_on_cpu(subgraph, rejections)
        for op_index, (op, found) in enumerate(zip(subgraph.ops, rejections, strict=True)):
            verdicts.append(
                OpVerdict(
                    subgraph_index=sg_index,
                    op_index=op_index,
                    op_type=op.type,
                    ok=not found,
                    rejections=tuple(found),
                    subgraph_role=roles.get(sg_index, "body"),
                )
            )
    return verdicts


def _while_with_dynamic_body(op: ir.Op) -> list[Rejection]:
    """WHILE outputs become dynamic when its body computes shapes from loop values (measured:
    a Keras bidirectional LSTM's body slices by the loop counter, and compilation fails)."""
    if op.type != "WHILE" or op.subgraph is None or op.subgraph.model is None:
        return []
    body = op.referenced_subgraphs.get("bodySubgraphIndex")
    culprit = _dynamic_op_in(op.subgraph.model, body, set())
    if culprit is None:
        return []
    rejection = reject(
        Reason.DYNAMIC_SHAPE,
        op.type,
        f"Its body (subgraph {body}) has {culprit.type} sized by loop values, so the loop's "
        "outputs have dynamic shapes.",
        fatal=True,
    )
    return [replace(rejection, op_index=op.index)]


def _dynamic_op_in(model: ir.Model, index: int | None, seen: set[int]) -> ir.Op | None:
    if index is None or index in seen or not 0 <= index < len(model.subgraphs):
        return None
    seen.add(index)
    for op in model.subgraphs[index].ops:
        sig = OpSignature.from_op(op)
        sized_by_values = op.type == "SLICE" and any(
            t is not None and not t.is_const for t in sig.inputs[1:3]
        )
        if sized_by_values or data_dependent_shape(sig) is not None:
            return op
        if op.type == "WHILE":
            nested = _dynamic_op_in(model, op.referenced_subgraphs.get("bodySubgraphIndex"), seen)
            if nested is not None:
                return nested
    return None


def _is_fp16_weight_dequantize(op: ir.Op) -> bool:
    src = op.inputs[0] if op.type == "DEQUANTIZE" and op.inputs else None
    return src is not None and src.type_name == "FLOAT16" and src.is_constant


def _fp16_dequantize_on_cpu(
    subgraph: ir.Subgraph, rejections: list[list[Rejection]]
) -> list[list[Rejection]]:
    """In a partly delegated subgraph, DEQUANTIZE ops of fp16 weights stay on the CPU."""
    weights = [_is_fp16_weight_dequantize(op) for op in subgraph.ops]
    partial = any(
        any(r.code != Reason.WRONG_RESULT for r in found)
        for found, is_weight in zip(rejections, weights, strict=True)
        if not is_weight
    )
    if not partial:
        return rejections
    result = []
    for op_index, (op, found, is_weight) in enumerate(
        zip(subgraph.ops, rejections, weights, strict=True)
    ):
        if is_weight and not found:
            found = [
                replace(
                    reject(
                        Reason.FP16_DEQUANTIZE,
                        op.type,
                        "Other ops of this graph stay on the CPU, so the delegate keeps every "
                        "fp16 DEQUANTIZE there too.",
                    ),
                    op_index=op_index,
                )
            ]
        result.append(found)
    return result


def model_issues(
    model: ModelLike,
    target: str | Target = DEFAULT_TARGET,
    verdicts: list[OpVerdict] | None = None,
) -> list[ModelIssue]:
    """Graph-level findings: each fatal rejection, and graph inputs with dynamic dimensions."""
    graph = _as_model(model)
    if verdicts is None:
        verdicts = op_verdicts(graph, target)
    return _issues(graph, verdicts, subgraph_roles(graph))


def _issues(graph: ir.Model, verdicts: list[OpVerdict], roles: dict[int, str]) -> list[ModelIssue]:
    issues = [
        ModelIssue(r.code, r.message, v.subgraph_index, v.op_index, fatal=True)
        for v in verdicts
        for r in v.rejections
        if r.fatal
    ]
    for sg_index, subgraph in enumerate(graph.subgraphs):
        if roles.get(sg_index) not in ("main", "signature"):
            continue
        for tensor in subgraph.inputs:
            if tensor.is_dynamic:
                shape = "x".join(str(d) for d in tensor.display_shape)
                issues.append(
                    ModelIssue(
                        Reason.DYNAMIC_INPUT,
                        f"Input {tensor.name!r} has shape {shape}. The GPU graph is built for the "
                        f"stored shape {list(tensor.shape)}; resizing this input later is not "
                        "possible on the GPU.",
                        sg_index,
                    )
                )
    for hazard in cpu_kernel_hazards(graph):
        issues.append(
            ModelIssue(
                Reason.CPU_WRONG_RESULT,
                f"{hazard.op_type}: {hazard.message}.",
                hazard.subgraph,
                hazard.op_index,
            )
        )
    return issues


def analyze(model: ModelLike, target: str | Target = DEFAULT_TARGET) -> StaticReport:
    """Verdicts and issues of ``model`` for ``target`` in one report."""
    graph = _as_model(model)
    tgt = get_target(target)
    roles = subgraph_roles(graph)
    verdicts = _verdicts(graph, tgt, roles)
    return StaticReport(tgt.name, tuple(verdicts), tuple(_issues(graph, verdicts, roles)))


def _as_model(model: ModelLike) -> ir.Model:
    return model if isinstance(model, ir.Model) else ir.load(model)
