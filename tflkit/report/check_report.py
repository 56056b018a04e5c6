"""The ``check`` report: plain dataclasses, serialisable with ``to_json`` (``tflkit.check/2``).
What the accelerator and LiteRT.js said of the model (``--probe``, ``--probe-browser``) is in
:mod:`tflkit.report.probe_report`, imported only by a check that probes.

``group_cpu_ops`` folds the per-op list into what a person reads: one group per subgraph, op
type, status and reason, with a count and op index ranges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tflkit.ir.composites import CompositeInfo
from tflkit.jsonable import plain_fields

if TYPE_CHECKING:  # a report holds them only after a probe
    from tflkit.report.probe_report import BrowserProbeInfo, ProbeInfo

CHECK_SCHEMA = "tflkit.check/2"

#: ``OpCheck.status`` values: where the op runs and why.
STATUS_GPU = "gpu"  # the delegate takes it and it sits in a partition the delegate runs
STATUS_REJECTED = "rejected"  # the delegate refuses it (see ``reasons``)
STATUS_NOT_TAKEN = "not_taken"  # taken by the checks, outside the partition(s) delegated
STATUS_BLOCKED = "blocked"  # taken by the checks, but GPU compilation of the model fails

#: The sentence for ops without a reason of their own.
STATUS_WHY = {
    STATUS_NOT_TAKEN: (
        "supported, but outside the partition the delegate takes (it delegates only the "
        "largest; fix the rejected ops between them)"
    ),
    STATUS_BLOCKED: (
        "supported, but GPU compilation of the model fails as a whole (see the fatal issue)"
    ),
}


@dataclass
class ReasonInfo:
    code: str
    message: str
    fatal: bool = False


@dataclass
class FixHint:
    """What fixes the op: a rewrite rule, an option, a conversion change, or nothing known.

    ``kind``: "rule" (a default rewrite rule: ``tflkit rewrite`` applies it), "opt_in_rule"
    (``tflkit rewrite --rule NAME``), "input_shape" (``--input-shape``), "convert" (convert the
    source model differently) or "none" (no fix known; ``summary`` says what happens instead).
    """

    rule: str | None
    summary: str
    kind: str = "rule"

    @property
    def text(self) -> str:
        """The fix in a few words, as the terminal shows it."""
        if self.kind == "rule":
            return f"rule {self.rule}"
        if self.kind == "opt_in_rule":
            return f"opt-in: rewrite --rule {self.rule}"
        return self.summary


@dataclass
class IssueInfo:
    """A finding about the whole graph: a fatal rejection, a dynamic input."""

    code: str
    message: str
    fatal: bool = False
    subgraph: int | None = None
    op_index: int | None = None
    fix: FixHint | None = None


@dataclass
class OpCheck:
    subgraph: int
    index: int
    type: str
    version: int
    role: str
    supported: bool
    on_gpu: bool
    reasons: list[ReasonInfo] = field(default_factory=list)
    fix: FixHint | None = None
    #: Supported, but left on CPU because the delegate takes only the largest partitions.
    not_taken: bool = False
    probe_on_gpu: bool | None = None
    probe_reasons: list[str] = field(default_factory=list)
    status: str = STATUS_GPU
    #: for a STABLEHLO_COMPOSITE: its name, decomposition subgraph, version and meaning
    composite: CompositeInfo | None = None

    @property
    def why(self) -> str:
        """Why the op is where it is, never empty (a composite's name and meaning first)."""
        if self.reasons:
            text = " ".join(r.message for r in self.reasons)
        else:
            text = STATUS_WHY.get(self.status, "runs on the GPU")
        if self.composite is not None and self.composite.name not in text:
            text = f"{self.composite.name} ({self.composite.meaning}): {text}"
        return text

    def to_json(self) -> dict[str, Any]:
        """Field for field, then ``why``; written out because a report holds an entry per op
        (``tests/test_check_report.py`` checks it against ``plain_fields``)."""
        return {
            "subgraph": self.subgraph,
            "index": self.index,
            "type": self.type,
            "version": self.version,
            "role": self.role,
            "supported": self.supported,
            "on_gpu": self.on_gpu,
            "reasons": [plain_fields(r) for r in self.reasons],
            "fix": None if self.fix is None else plain_fields(self.fix),
            "not_taken": self.not_taken,
            "probe_on_gpu": self.probe_on_gpu,
            "probe_reasons": list(self.probe_reasons),
            "status": self.status,
            "composite": None if self.composite is None else plain_fields(self.composite),
            "why": self.why,
        }


@dataclass
class SubgraphInfo:
    index: int
    name: str
    #: "main", "signature", "body" (IF/WHILE/CALL_ONCE target) or "decomposition"
    role: str
    ops: int
    gpu_ops: int


@dataclass
class PartitionInfo:
    subgraph: int
    device: str
    ops: list[int]


@dataclass
class TransferInfo:
    subgraph: int
    tensor: str
    shape: list[int | str]
    dtype: str
    #: None while the tensor's shape is dynamic (unknown until ``--input-shape``).
    bytes: int | None
    direction: str
    kind: str


@dataclass
class CheckReport:
    path: str
    sha256: str
    target: str
    target_title: str
    max_partitions: int | None
    compiles: bool
    gpu_ready: bool
    summary: str
    total_ops: int
    gpu_ops: int
    gpu_partitions: int
    flops_total: int
    flops_gpu: int
    #: None when a copied tensor has a dynamic shape (unknown until ``--input-shape``).
    internal_transfer_bytes: int | None
    io_transfer_bytes: int | None
    ops: list[OpCheck]
    partitions: list[PartitionInfo]
    transfers: list[TransferInfo]
    issues: list[IssueInfo]
    probe: ProbeInfo | None = None
    browser: BrowserProbeInfo | None = None
    subgraphs: list[SubgraphInfo] = field(default_factory=list)
    #: The ``--input-shape`` values the model was checked at, by the name given.
    input_shapes: dict[str, list[int]] = field(default_factory=dict)

    @property
    def cpu_ops(self) -> int:
        return self.total_ops - self.gpu_ops

    @property
    def offending_ops(self) -> list[OpCheck]:
        return [op for op in self.ops if not op.on_gpu]

    def to_json(self) -> dict[str, Any]:
        data = plain_fields(self)
        data["cpu_ops"] = self.cpu_ops
        data["gpu_flops_share"] = self.flops_gpu / self.flops_total if self.flops_total else None
        if self.probe is not None:
            data["probe"]["agreement_rate"] = self.probe.agreement_rate
        return {"schema": CHECK_SCHEMA, **data}


# --- grouping for people -------------------------------------------------------------------------


@dataclass
class OpGroup:
    """Ops of one subgraph left on the CPU for the same reason."""

    subgraph: int
    types: dict[str, int]  # op type -> count, in first-seen order
    status: str
    indices: list[int]
    why: str
    #: The reason text differs between the ops (the terminal shows the first op's).
    varies: bool = False
    fix: FixHint | None = None
    fatal: bool = False

    @property
    def count(self) -> int:
        return len(self.indices)

    @property
    def type_label(self) -> str:
        if len(self.types) == 1:
            return next(iter(self.types))
        shown = [f"{t} x{n}" for t, n in list(self.types.items())[:3]]
        more = len(self.types) - 3
        return ", ".join(shown) + (f", {more} more types" if more > 0 else "")


def _reason_key(op: OpCheck) -> tuple[str, ...]:
    """The reason codes and their first sentences: ops differing only in a tensor name group."""
    return tuple(f"{r.code}|{r.message.split('. ')[0]}" for r in op.reasons)


def group_cpu_ops(report: CheckReport) -> list[OpGroup]:
    """The ops off the GPU, or on it but computed wrong there (``WRONG_RESULT``), grouped by
    (subgraph, op type, reason); ops without a reason of their
    own (not taken, blocked) group by status across op types. Largest groups first within a
    subgraph; fatal reasons first of all; subgraphs in the order of ``report.ops``."""
    groups: dict[tuple[Any, ...], OpGroup] = {}
    for op in report.ops:
        if op.on_gpu and op.status != STATUS_REJECTED:
            continue
        if op.reasons:
            fix = (op.fix.kind, op.fix.rule, op.fix.summary) if op.fix else None
            key: tuple[Any, ...] = (op.subgraph, op.type, op.status, _reason_key(op), fix)
        else:
            key = (op.subgraph, None, op.status)
        group = groups.get(key)
        if group is None:
            fatal = any(r.fatal for r in op.reasons)
            group = groups[key] = OpGroup(
                op.subgraph, {}, op.status, [], op.why, fix=op.fix, fatal=fatal
            )
        elif op.why != group.why:
            group.varies = True
        group.types[op.type] = group.types.get(op.type, 0) + 1
        group.indices.append(op.index)

    # subgraphs in the report's order (an LLM graph's decode signature first: ``check_report``)
    rank = {i: n for n, i in enumerate(dict.fromkeys(op.subgraph for op in report.ops))}
    return sorted(
        groups.values(),
        key=lambda g: (rank[g.subgraph], not g.fatal, g.status != STATUS_REJECTED, -g.count),
    )


def index_ranges(indices: list[int], limit: int = 6) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"; at most ``limit`` pieces, then "..."."""
    pieces: list[str] = []
    ordered = sorted(set(indices))
    start = prev = ordered[0] if ordered else 0
    for i in [*ordered[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        pieces.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    if len(pieces) > limit:
        return ", ".join(pieces[:limit]) + ", ..."
    return ", ".join(pieces)
