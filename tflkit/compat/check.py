"""``check``: what the GPU delegate will run and why, statically and (``probe=True``) for real.

Static verdicts per op come from the target's constraint table (``static``); the partition
simulation turns them into what the delegate takes; the probe compiles the model on the real
accelerator in a subprocess and every op where the two disagree is listed. A static claim that
GPU compilation fails for the whole model is itself compared with what the accelerator did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tflkit import ir
from tflkit.compat import partition, static
from tflkit.compat.custom_ops import CPU_KERNEL_CUSTOM_OPS, EDGETPU_OP
from tflkit.compat.reasons import Reason
from tflkit.compat.targets import DEFAULT_TARGET, get_target
from tflkit.ir.composites import composite_of
from tflkit.report.check_report import (
    STATUS_BLOCKED,
    STATUS_GPU,
    STATUS_NOT_TAKEN,
    STATUS_REJECTED,
    CheckReport,
    FixHint,
    IssueInfo,
    OpCheck,
    PartitionInfo,
    ReasonInfo,
    SubgraphInfo,
    TransferInfo,
)

if TYPE_CHECKING:
    pass

#: The default for ``max_partitions``: whatever the target's delegate does by default.
TARGET_DEFAULT = -1


def _sum(values: Sequence[int | None]) -> int | None:
    """Total bytes, or None when one of them is unknown (a dynamic shape)."""
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _decode_first(model: ir.Model) -> list[int]:
    """Subgraph indices in report order: an LLM graph's decode signature (the graph that runs
    per token) first, then the rest in file order."""
    decode = {
        id(s.subgraph) for s in model.signatures if s.key == "decode" or s.key.startswith("decode_")
    }
    order = range(len(model.subgraphs))
    return sorted(order, key=lambda i: id(model.subgraphs[i]) not in decode)


def check_report(
    model: ir.Model,
    *,
    target: str = DEFAULT_TARGET,
    max_partitions: int | None = TARGET_DEFAULT,
    path: str = "<model>",
    sha256: str = "",
    advise: Advise | None = None,
) -> CheckReport:
    """The static report: verdicts, partitions, transfers, FLOP share, fix hints.

    ``advise`` names the rewrite that fixes a rejected op (the rule catalogue's advisor,
    :class:`tflkit.rewriter.advice.Advisor`); ops it has no rule for get
    :func:`conversion_hint`."""
    spec = get_target(target)
    limit = spec.max_partitions if max_partitions == TARGET_DEFAULT else max_partitions
    result = static.analyze(model, spec)
    verdicts = {(v.subgraph_index, v.op_index): v for v in result.verdicts}
    found = dynamic_inputs(model)
    dynamic = " ".join(d.hint for d in found) if len(found) <= _NAMED else wildcard_hint(found)
    placeholders = any(  # a dynamic batch stored as 1 is a real batch; other dims may not be
        d < 0 for t in model.main.inputs for d in (t.shape_signature or ())[1:]
    )
    unprepared = (
        _stored_shape_issue(model, dynamic_input_advice(found))
        if result.compiles and placeholders
        else None
    )
    compiles = result.compiles and unprepared is None

    tally = _Tally()
    for sg_index in _decode_first(model):
        if model.subgraphs[sg_index].ops:
            _tally_subgraph(tally, model, sg_index, verdicts, compiles, limit, dynamic, advise)
    issues = _issue_infos(result.issues, found, unprepared)
    ops = tally.ops
    total = len(ops)
    report = CheckReport(
        path=path,
        sha256=sha256,
        target=spec.name,
        target_title=spec.title,
        max_partitions=limit,
        compiles=compiles,
        gpu_ready=compiles and total > 0 and tally.gpu_ops == total and not _wrong_on_gpu(ops),
        summary="",
        total_ops=total,
        gpu_ops=tally.gpu_ops,
        gpu_partitions=tally.gpu_partitions,
        flops_total=tally.flops_total,
        flops_gpu=tally.flops_gpu,
        internal_transfer_bytes=_sum(tally.internal),
        io_transfer_bytes=_sum(tally.io),
        ops=ops,
        partitions=tally.partitions,
        transfers=tally.transfers,
        issues=issues,
        subgraphs=tally.subgraphs,
    )
    report.summary = summarize(report)
    return report


@dataclass
class _Tally:
    """The rows and totals of a check report, added to subgraph by subgraph."""

    ops: list[OpCheck] = field(default_factory=list)
    partitions: list[PartitionInfo] = field(default_factory=list)
    transfers: list[TransferInfo] = field(default_factory=list)
    subgraphs: list[SubgraphInfo] = field(default_factory=list)
    internal: list[int | None] = field(default_factory=list)
    io: list[int | None] = field(default_factory=list)
    gpu_ops: int = 0
    gpu_partitions: int = 0
    flops_total: int = 0
    flops_gpu: int = 0


def _tally_subgraph(
    tally: _Tally,
    model: ir.Model,
    sg_index: int,
    verdicts: dict[tuple[int, int], static.OpVerdict],
    compiles: bool,
    limit: int | None,
    dynamic: str,
    advise: Advise | None,
) -> None:
    """Add subgraph ``sg_index``'s partitions, copies and op rows to ``tally``."""
    subgraph = model.subgraphs[sg_index]
    positions = {id(op): i for i, op in enumerate(subgraph.ops)}

    def supported(op: ir.Op) -> bool:
        verdict = verdicts.get((sg_index, positions[id(op)]))
        return compiles and verdict is not None and verdict.placed

    plan = partition.plan_partitions(subgraph, supported, max_partitions=limit)
    on_gpu = {i for p in plan.partitions if p.device == "gpu" for i in p.ops}
    not_taken = set(plan.dropped_ops)
    tally.gpu_ops += plan.gpu_ops
    tally.gpu_partitions += plan.gpu_partitions
    tally.flops_total += plan.flops_total
    tally.flops_gpu += plan.flops_gpu
    for t in plan.transfers:
        (tally.internal if t.kind == "internal" else tally.io).append(t.bytes)
    tally.partitions += [PartitionInfo(sg_index, p.device, p.ops) for p in plan.partitions]
    tally.transfers += [
        TransferInfo(sg_index, t.tensor, t.shape, t.dtype, t.bytes, t.direction, t.kind)
        for t in plan.transfers
    ]
    first = verdicts.get((sg_index, 0))
    tally.subgraphs.append(
        SubgraphInfo(
            sg_index, subgraph.name or "", first.subgraph_role if first else "body",
            len(subgraph.ops), plan.gpu_ops,
        )
    )  # fmt: skip
    for index, op in enumerate(subgraph.ops):
        verdict = verdicts.get((sg_index, index))
        reasons = [
            ReasonInfo(str(r.code), r.message, r.fatal)
            for r in (verdict.rejections if verdict else ())
        ]
        if reasons:
            status = STATUS_REJECTED
        elif index in on_gpu:
            status = STATUS_GPU
        elif not compiles:
            status = STATUS_BLOCKED
        else:
            status = STATUS_NOT_TAKEN
        tally.ops.append(
            OpCheck(
                subgraph=sg_index,
                index=index,
                type=op.type,
                version=op.version,
                role=verdict.subgraph_role if verdict else "main",
                supported=bool(verdict and verdict.ok),
                on_gpu=index in on_gpu,
                reasons=reasons,
                fix=_fix(op, reasons, dynamic, advise) if reasons else None,
                not_taken=index in not_taken,
                status=status,
                composite=composite_of(op),
            )
        )


def _issue_infos(
    found_issues: Sequence[static.ModelIssue],
    found: Sequence[DynamicInput],
    unprepared: IssueInfo | None,
) -> list[IssueInfo]:
    """The report's model issues, with the fix for dynamic inputs."""
    issues = [
        IssueInfo(
            str(i.code),
            i.message,
            i.fatal,
            i.subgraph_index,
            i.op_index,
            FixHint(None, _issue_advice(i.message, found), "input_shape")
            if i.code == Reason.DYNAMIC_INPUT
            else None,
        )
        for i in found_issues
    ]
    if unprepared is not None:  # it says all the notes on dynamic inputs would
        issues = [unprepared, *(i for i in issues if i.code != Reason.DYNAMIC_INPUT)]
    return issues


def summarize(report: CheckReport) -> str:
    """One line: GPU-ready, or how much falls back and where."""
    if not report.compiles:
        fatal = next((i for i in report.issues if i.fatal), None)
        where = fatal.code if fatal else "a fatal rejection"
        if fatal is not None and fatal.op_index is not None:
            where += f" at op {fatal.op_index}"
            where += f" of subgraph {fatal.subgraph}" if fatal.subgraph else ""
        return f"GPU compilation fails for the whole model ({where}): all ops run on the CPU"
    if report.total_ops == 0:
        return "the model has no ops"
    if report.gpu_ready:
        return f"GPU-ready: all {report.total_ops} ops run on the GPU"
    wrong = _wrong_on_gpu(report.ops)
    said = (
        f"{len(wrong)} op(s) run on the GPU but compute wrong values there "
        f"({', '.join(sorted({o.type for o in wrong}))}: WRONG_RESULT)"
    )
    if wrong and not report.cpu_ops:
        return f"not GPU-ready: {said}"
    cpu_partitions = sum(1 for p in report.partitions if p.device == "cpu")
    plural = "s" if cpu_partitions != 1 else ""
    return (
        f"{report.cpu_ops} of {report.total_ops} ops fall back to CPU "
        f"in {cpu_partitions} partition{plural}" + (f"; {said}" if wrong else "")
    )


def _wrong_on_gpu(ops: Sequence[OpCheck]) -> list[OpCheck]:
    """Ops the accelerator runs but computes wrong (the table's ``WRONG_RESULT``)."""
    return [o for o in ops if o.on_gpu and o.status == "rejected"]


# --- fixes ----------------------------------------------------------------------------------------

_RNN_CELL_OPS = frozenset({"FULLY_CONNECTED", "BATCH_MATMUL"})
_RNN_GATE_OPS = frozenset({"LOGISTIC", "TANH"})


@dataclass(frozen=True)
class DynamicInput:
    """A dynamic input of the entry point, named as its users see it (the signature name)."""

    name: str
    tensor: ir.Tensor
    #: The shape stored in the file (what the runtime allocates unless resized).
    stored: tuple[int, ...]
    #: The shape signature: -1 for each dynamic dimension.
    signature: tuple[int, ...]

    @property
    def dynamic_dims(self) -> list[int]:
        return [i for i, d in enumerate(self.signature) if d < 0]

    @property
    def batch_only(self) -> bool:
        """Only the batch is dynamic and it is stored as 1: fixing it to 1 is what the stored
        shape already says (a rank-1 input has no batch: its one dimension is the data)."""
        sig = self.signature
        return (
            len(sig) >= 2 and sig[0] == -1 and self.stored[0] == 1 and all(d >= 0 for d in sig[1:])
        )

    @property
    def stored_shape(self) -> str:
        return ",".join(str(d) for d in self.stored)

    @property
    def flag(self) -> str:
        """``--input-shape NAME=D1,...`` with the stored numbers."""
        return f"--input-shape {self.name}={self.stored_shape}"

    @property
    def hint(self) -> str:
        """The flag, and for anything but a batch stored as 1 which dimensions to change."""
        if self.batch_only:
            return self.flag
        dims = ",".join(str(i) for i in self.dynamic_dims)
        which = "dim" if len(self.dynamic_dims) == 1 else "dims"
        return f"{self.flag} ({which} {dims}: the app's sizes)"


def dynamic_inputs(model: ir.Model) -> list[DynamicInput]:
    """The entry point's inputs with a -1 in their shape signature, by signature name."""
    entry = model.signatures[0].inputs if model.signatures else {}
    names = {id(t): name for name, t in entry.items()}
    return [
        DynamicInput(
            names.get(id(t), t.name),
            t,
            tuple(int(d) for d in t.shape),
            tuple(int(d) for d in (t.shape_signature or t.shape)),
        )
        for t in model.main.inputs
        if t.is_dynamic
    ]


def _issue_advice(message: str, found: Sequence[DynamicInput]) -> str:
    """The advice for the input a DYNAMIC_INPUT issue names (all of them if it names none)."""
    if len(found) > _NAMED:  # one issue per input, shown as one line: one flag for them all
        return wildcard_hint(found)
    named = [d for d in found if f"'{d.tensor.name}'" in message]
    return dynamic_input_advice(named or found)


#: Up to this many dynamic inputs a hint names each; more get one ``--input-shape '*=N'``.
_NAMED = 2


def wildcard_hint(found: Sequence[DynamicInput]) -> str:
    """``--input-shape '*=N'`` for every dynamic input at once: N the size they all store, or
    ``N`` when they store different sizes."""
    sizes = sorted({d.stored[i] for d in found for i in d.dynamic_dims})
    size = str(sizes[0]) if len(sizes) == 1 else "N"
    what = f"to {size}, the size they store" if len(sizes) == 1 else "to N, what the app feeds"
    return (
        f"--input-shape '*={size}' (every dynamic dimension of the {len(found)} dynamic inputs "
        f"{what}; NAME=D1,D2,... sets one input apart, e.g. {found[0].flag})"
    )


def dynamic_input_advice(found: Sequence[DynamicInput]) -> str:
    """One sentence on what ``--input-shape`` to pass, with real numbers."""
    if len(found) > _NAMED:
        return wildcard_hint(found)
    parts = []
    for d in found:
        if d.batch_only:
            parts.append(
                f"{d.flag} (its dynamic batch, stored as 1; `rewrite` fixes it to 1 by default)"
            )
        else:
            which = "dimension" if len(d.dynamic_dims) == 1 else "dimensions"
            dims = ", ".join(str(i) for i in d.dynamic_dims)
            stored = ", ".join(str(d.stored[i]) for i in d.dynamic_dims)
            parts.append(
                f"{d.flag}, with {which} {dims} (stored as {stored}) replaced by what the app feeds"
            )
    return "; ".join(parts)


def _stored_shape_issue(model: ir.Model, hint: str) -> IssueInfo | None:
    """A fatal issue when the model does not even prepare on the CPU at the shapes stored for
    its dynamic inputs. Measured: wyoming-openwakeword's melspectrogram stores [1, 1] for its
    ?x? audio input; its CONV_2D (a 512-wide kernel) fails to prepare, and the accelerator
    answers "Failed to modify graph with delegate" for the whole model. The CPU interpreter
    runs in a child process (:mod:`tflkit.proc._cpu_smoke_worker`): a native crash there is no
    claim."""
    import tempfile

    from tflkit.proc import _cpu_smoke_worker
    from tflkit.proc.worker import spawn_python

    with tempfile.TemporaryDirectory(prefix="tflkit-prepare-") as tmp:
        path = Path(tmp) / "model.tflite"
        path.write_bytes(ir.dumps(model))
        done = spawn_python(_cpu_smoke_worker.main, path, cwd=tmp, timeout=120)
    lines = done.output.splitlines()
    stages = [line for line in lines if line.startswith("stage: ")]
    error = next((line[7:] for line in lines if line.startswith("error: ")), None)
    if done.returncode != 1 or error is None or not stages or "allocate" not in stages[-1]:
        return None
    stored = ", ".join(f"{d.name} {list(d.stored)}" for d in dynamic_inputs(model))
    return IssueInfo(
        str(Reason.DYNAMIC_INPUT),
        f"At the shapes stored for its dynamic inputs ({stored}) the model does not prepare "
        f"({error}), so GPU compilation fails as a whole; give the real shapes.",
        fatal=True,
        subgraph=0,
        fix=FixHint(None, hint, "input_shape"),
    )


def _is_rnn_loop(op: ir.Op) -> bool:
    """A WHILE whose body computes a recurrent cell (matmuls and sigmoid/tanh gates)."""
    model = op.subgraph.model if op.subgraph is not None else None
    body = op.referenced_subgraphs.get("bodySubgraphIndex")
    if model is None or body is None or not 0 <= body < len(model.subgraphs):
        return False
    types = {o.type for o in model.subgraphs[body].ops}
    return bool(types & _RNN_CELL_OPS) and bool(types & _RNN_GATE_OPS)


#: Names the rewrite rule that fixes an op for its reasons: (op, reasons, the --input-shape
#: hint of the model) -> hint, None when no rule does.
Advise = Callable[[ir.Op, Sequence[ReasonInfo], str], "FixHint | None"]


def _fix(
    op: ir.Op, reasons: Sequence[ReasonInfo], dynamic: str, advise: Advise | None
) -> FixHint | None:
    hint = advise(op, reasons, dynamic) if advise is not None else None
    return hint if hint is not None else conversion_hint(op, reasons, dynamic)


def conversion_hint(op: ir.Op, reasons: Sequence[ReasonInfo], dynamic: str = "") -> FixHint | None:
    """What fixes ``op`` when no rewrite rule does: ``--input-shape``, a conversion change, or
    nothing needed; None when nothing is known."""
    codes = {r.code for r in reasons}
    if op.type == "WHILE" and _is_rnn_loop(op):
        return FixHint(
            None,
            "RNN as WHILE: convert with unrolling (Keras RNN unroll=True) or as a fused LSTM "
            "(UNIDIRECTIONAL_SEQUENCE_LSTM)",
            "convert",
        )
    if dynamic and codes & {Reason.DYNAMIC_SHAPE.value, Reason.DYNAMIC_INPUT.value}:
        return FixHint(None, dynamic, "input_shape")
    if op.type in ("IF", "WHILE"):
        return FixHint(
            None, "none: the op stays on the CPU, its subgraphs run on the GPU on their own", "none"
        )
    if op.opcode.is_custom and op.opcode.custom_code in CPU_KERNEL_CUSTOM_OPS:
        return FixHint(None, "none needed: its CPU kernel is in every standard resolver", "none")
    if op.opcode.is_custom and op.opcode.custom_code == EDGETPU_OP:
        return FixHint(None, "use the model from before Edge TPU compilation", "convert")
    if Reason.FP16_DEQUANTIZE.value in codes:
        return FixHint(
            None, "none needed: moves to the GPU once the rest of its graph does", "none"
        )
    return None
