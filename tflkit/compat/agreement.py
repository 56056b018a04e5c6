"""Per-op agreement between the static verdict and what the real GPU accelerator did.

``probe_op_verdicts(model, result)`` turns a :class:`~tflkit.gpu.probe.ProbeResult` into one
:class:`ProbeOpVerdict` per op; ``compare(static, probed)`` lines those up with the static
:class:`~tflkit.compat.static.OpVerdict` list. To probe a corpus in few processes, use
:func:`tflkit.gpu.probe.probe_many`.

How the accelerator's log maps to ops (ai-edge-litert 2.3.0, measured):

* every subgraph that is not fully taken prints one rejection block (lines, then a summary
  ``N operations will run on the GPU, and the remaining M ...``) when it is delegated; the main
  subgraph comes first and the others follow in index order; IF/WHILE bodies and CALL_ONCE
  initialisers are delegated too and a WHILE body's block may be printed several times;
* a fully taken subgraph prints nothing;
* lines are deduplicated per (op type, message); a message about a tensor ends with its name,
  and a signature's inputs/outputs are named by their signature names;
* ops whose inputs are all constants are folded when the model loads and are not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tflkit import ir
from tflkit.compat.partition import plan_partitions
from tflkit.compat.static import OpVerdict, subgraph_roles
from tflkit.gpu.log import (
    REJECTION_HEADER,
    GpuLog,
    LogRejection,
    matching_ops,
    parse_gpu_log,
    signature_aliases,
)
from tflkit.gpu.probe_result import COMPILED_STATUSES

__all__ = [
    "Agreement",
    "CountMismatch",
    "Disagreement",
    "LogBlock",
    "ProbeOpVerdict",
    "ProbeVerdicts",
    "combine",
    "compare",
    "log_blocks",
    "probe_op_verdicts",
]

#: Probe statuses after which the log says what the delegate took.
_NOT_TAKEN = (
    "taken by the delegate's checks, but outside the largest partition, the only one the "
    "accelerator delegates"
)


# --- what the probe says per op -----------------------------------------------------------------


@dataclass(frozen=True)
class ProbeOpVerdict:
    """What the accelerator decided for one op.

    ``on_gpu``: the delegate took the op (no rejection line names it), the counterpart of the
    static ``OpVerdict.ok``; False when it left it on the CPU; None when the probe cannot say
    (crash, compile error, ambiguous log). ``in_gpu_partition``: the op also sits in the one
    partition the accelerator delegates (the largest), i.e. really runs on the GPU; None when
    the log's counts do not confirm the placement.
    """

    on_gpu: bool | None
    reasons: list[str] = field(default_factory=list)
    in_gpu_partition: bool | None = None


@dataclass(frozen=True)
class LogBlock:
    """One rejection block of the log and the subgraph it was tied to.

    ``subgraph`` is None when the block fitted several subgraphs (``candidates``) or none.
    """

    rejections: tuple[LogRejection, ...]
    on_gpu: int | None
    on_cpu: int | None
    subgraph: int | None = None
    candidates: tuple[int, ...] = ()


@dataclass(frozen=True)
class CountMismatch:
    """A subgraph whose CPU ops, as mapped from the lines, differ from the summary's count."""

    subgraph: int
    summary_cpu: int
    mapped_cpu: int
    note: str


class ProbeVerdicts(dict[tuple[int, int], ProbeOpVerdict]):
    """``(subgraph, op index) -> ProbeOpVerdict``, plus how the log was read."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[LogBlock] = []
        self.count_mismatches: list[CountMismatch] = []
        self.notes: list[str] = []
        #: Why the probe cannot speak about any op (None when it can).
        self.unavailable: str | None = None


def log_blocks(text: str) -> list[GpuLog]:
    """The rejection blocks of a raw accelerator log, in order, each parsed on its own."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if REJECTION_HEADER in line:
            current = [line]
            blocks.append(current)
            continue
        if current is not None:
            current.append(line)
            if "operations will run on the" in line:
                current = None
    return [parse_gpu_log("\n".join(block)) for block in blocks]


def probe_op_verdicts(
    model: ir.Model, result: Any, static: Iterable[OpVerdict] | None = None
) -> ProbeVerdicts:
    """Per-op verdicts read from ``result`` (a ProbeResult of ``model``).

    Each rejection block is tied to the one subgraph it fits: its summary counts the
    subgraph's ops (all of them, or all but the load-time-folded ones), every op type it names
    is in the subgraph, and every tensor it names belongs to an op of that type there; blocks
    follow subgraph order, so a block never goes to a subgraph before the previous block's.
    A block that still fits several subgraphs (or none) is matched by op type and tensor name
    (signature aliases included) across those candidates, or across every subgraph, and a note
    says so. Lines with no tensor name stand for every op of that type. The accelerator then
    delegates only the largest partition of what it took (``in_gpu_partition``); the CPU ops
    this gives are checked against the block's summary. When they are too many and a line
    naming no tensor matched several ops, those ops get ``on_gpu=None`` (the log does not say
    which of them it rejected), unless the log's unlaid constants (``GpuLog.unconvertible``)
    or ``static`` (the static verdicts) name the ones it kept off the GPU and they give the
    count: then those are the rejected ones and the others ran on the GPU. A line is never
    applied to every op of its type against the summary's count. Every unexplained difference
    is recorded in ``count_mismatches``.
    Subgraphs without a block were taken whole. Decomposition subgraphs (StableHLO
    composites) are not delegated on their own, so their ops get None.
    """
    verdicts = ProbeVerdicts()
    keys = [(sg.index, op.index) for sg in model.subgraphs for op in sg.ops]
    why_not = _unavailable(result)
    if why_not is not None:
        verdicts.unavailable = why_not
        verdicts.update({key: ProbeOpVerdict(None, [why_not]) for key in keys})
        return verdicts

    aliases = _aliases(model)
    claims = None if static is None else {(v.subgraph_index, v.op_index): v.placed for v in static}
    blocks = _map_blocks(model, log_blocks(result.log_text), aliases)
    verdicts.blocks = blocks
    rejected: dict[tuple[int, int], list[str]] = {}
    by_subgraph: dict[int, list[LogBlock]] = {}
    for block in blocks:
        targets = [block.subgraph] if block.subgraph is not None else list(block.candidates)
        if block.subgraph is None:
            verdicts.notes.append(
                f"a block ({_describe(block)}) fits subgraphs {block.candidates or 'none'}: "
                "matched by op type and tensor name across them"
            )
            targets = targets or [sg.index for sg in model.subgraphs]
        else:
            by_subgraph.setdefault(block.subgraph, []).append(block)
        for sg_index in targets:
            _mark(model.subgraphs[sg_index], block, aliases.get(sg_index), rejected, verdicts)

    roles = subgraph_roles(model)
    for sg in model.subgraphs:
        if roles.get(sg.index) == "decomposition":
            note = "decomposition subgraph: not delegated on its own"
            verdicts.update({(sg.index, op.index): ProbeOpVerdict(None, [note]) for op in sg.ops})
            continue
        sg_blocks = by_subgraph.get(sg.index, [])
        unlaid = getattr(result.log, "unconvertible", [])
        unknown, placed = _place(
            sg, sg_blocks, aliases.get(sg.index), rejected, verdicts, claims, unlaid
        )
        for op in sg.ops:
            key = (sg.index, op.index)
            if op.index in unknown:
                verdicts[key] = ProbeOpVerdict(None, [unknown[op.index]])
                continue
            where = None if placed is None else placed[op.index]
            reasons = list(rejected.get(key, []))
            if key not in rejected and where is False:
                reasons.append(_NOT_TAKEN)
            verdicts[key] = ProbeOpVerdict(key not in rejected, reasons, where)
    if result.log.gpu_kernels == 0 and any(v.in_gpu_partition for v in verdicts.values()):
        note = "the log shows no GPU kernel built, yet no block left these ops on the CPU"
        verdicts.notes.append(note)
        for key, verdict in list(verdicts.items()):
            if verdict.in_gpu_partition:
                verdicts[key] = ProbeOpVerdict(None, [note])
    return verdicts


def _unavailable(result: Any) -> str | None:
    if result.status not in COMPILED_STATUSES or not result.compiled:
        detail = result.error or result.log.fatal or result.exit_description or ""
        return f"probe {result.status}: {detail}".rstrip(": ")
    if result.log.fatal_kind == "delegate_failed":
        return f"the delegate failed: {result.log.fatal}"
    return None


def _aliases(model: ir.Model) -> dict[int, dict[str, str]]:
    found: dict[int, dict[str, str]] = {}
    for signature in model.signatures:
        found.setdefault(signature.subgraph.index, {}).update(signature_aliases(signature))
    return found


def _folded(op: ir.Op) -> bool:
    present = [t for t in op.inputs if t is not None]
    return bool(present) and all(t.is_constant for t in present)


def _fits(
    sg: ir.Subgraph, block: GpuLog, aliases: dict[str, str] | None, exact_count: bool
) -> bool:
    types = {op.type for op in sg.ops}
    if any(r.op_type not in types for r in block.rejections):
        return False
    if any(not matching_ops(r, sg.ops, aliases) for r in block.rejections):
        return False
    if not exact_count or not block.summaries:
        return True
    total = sum(block.summaries[0])
    return total in (len(sg.ops), len(sg.ops) - sum(_folded(op) for op in sg.ops))


def _map_blocks(
    model: ir.Model, parsed: list[GpuLog], aliases: dict[int, dict[str, str]]
) -> list[LogBlock]:
    blocks: list[LogBlock] = []
    floor = 0
    for block in parsed:
        fitting: list[int] = []
        for exact in (True, False):
            fitting = [
                sg.index for sg in model.subgraphs if _fits(sg, block, aliases.get(sg.index), exact)
            ]
            if fitting:
                break
        ordered = [i for i in fitting if i >= floor] or fitting
        gpu, cpu = block.summaries[0] if block.summaries else (None, None)
        mapped = _pick(ordered)
        if mapped is not None:
            floor = mapped
        blocks.append(LogBlock(tuple(block.rejections), gpu, cpu, mapped, tuple(ordered)))
    return blocks


def _pick(candidates: list[int]) -> int | None:
    """The subgraph a block belongs to when exactly one fits it."""
    return candidates[0] if len(candidates) == 1 else None


def _describe(block: LogBlock) -> str:
    lines = "; ".join(f"{r.op_type}: {r.reason}" for r in block.rejections[:3])
    return f"{lines} / {block.on_gpu} GPU + {block.on_cpu} CPU"


def _line(rejection: LogRejection) -> str:
    text = f"{rejection.op_type}: {rejection.reason}".rstrip()
    return f"{text} [{rejection.detail}]" if rejection.detail else text


def _mark(
    sg: ir.Subgraph,
    block: LogBlock,
    aliases: dict[str, str] | None,
    rejected: dict[tuple[int, int], list[str]],
    verdicts: ProbeVerdicts,
) -> None:
    for rejection in block.rejections:
        ops = matching_ops(rejection, sg.ops, aliases)
        if not ops and block.subgraph is not None:
            verdicts.notes.append(f"subgraph {sg.index}: no op matches {_line(rejection)!r}")
        for op in ops:
            reasons = rejected.setdefault((sg.index, op.index), [])
            if _line(rejection) not in reasons:
                reasons.append(_line(rejection))


def _place(
    sg: ir.Subgraph,
    blocks: list[LogBlock],
    aliases: dict[str, str] | None,
    rejected: dict[tuple[int, int], list[str]],
    verdicts: ProbeVerdicts,
    static: dict[tuple[int, int], bool] | None = None,
    shapes: Sequence[Sequence[Any]] = (),
) -> tuple[dict[int, str], dict[int, bool] | None]:
    """Ops whose verdict the log leaves open, and where each op runs (None: unknown).

    The accelerator delegates only the largest partition of each subgraph: the ops the lines
    do not reject are partitioned and the largest group is taken; the result must give the
    summary's CPU count (ops folded at load are in neither count). A line that names no tensor
    stands for every op of its type, though the delegate may have refused only some: when
    rejecting all of them does not give the summary's count, only the ones reading a constant
    the log says the delegate cannot lay out (``shapes``), else the ones the static table also
    keeps off the GPU (``static``: (subgraph, op) -> placed), are taken as rejected, if that
    gives the count (see :func:`_attribute`); otherwise those ops are left unknown, never
    called rejected (``rejected`` is updated in place).
    """
    counts = list(dict.fromkeys(b.on_cpu for b in blocks if b.on_cpu is not None))
    cpu, placed = _count_cpu(sg, rejected)
    if all(c == cpu for c in counts):
        return {}, placed
    shared = _shared_lines(sg, blocks, aliases)
    found = _attribute(sg, shared, rejected, static, counts, shapes)
    if found is not None:
        chosen, why = found
        for op in shared:
            if op.index not in chosen:
                rejected.pop((sg.index, op.index), None)
        verdicts.notes.append(
            f"subgraph {sg.index}: a line naming no tensor stands for {len(shared)} ops; the "
            f"summary's {counts[0]} CPU ops are given by the {len(chosen)} of them that {why}"
        )
        return {}, _count_cpu(sg, rejected)[1]
    unknown: dict[int, str] = {}
    if shared:
        note = (
            f"the summary leaves {counts[0]} ops on the CPU, the lines {cpu}: a line naming no "
            f"tensor stands for {len(shared)} {_types(shared)} ops, and the log does not say "
            "which of them left the GPU"
        )
        unknown = {op.index: note for op in shared}
        verdicts.notes.append(f"subgraph {sg.index}: {note}")
    for summary_cpu in counts:
        if summary_cpu != cpu:
            verdicts.count_mismatches.append(
                CountMismatch(
                    sg.index,
                    summary_cpu,
                    cpu,
                    "a line without a tensor name matches more ops than were rejected"
                    if shared
                    else "the lines and the largest-partition rule do not give the summary's count",
                )
            )
    return unknown, None


def _count_cpu(
    sg: ir.Subgraph, rejected: dict[tuple[int, int], list[str]]
) -> tuple[int, dict[int, bool]]:
    """CPU ops (the summary's count) and each op's place, when exactly ``rejected`` is refused."""
    taken = plan_partitions(
        sg, lambda op: (sg.index, op.index) not in rejected, max_partitions=1
    ).partitions
    on_gpu = {i for p in taken if p.device == "gpu" for i in p.ops}
    # An op the delegate took whose inputs are all constant may have been folded at load.
    counted = [op for op in sg.ops if (sg.index, op.index) in rejected or not _folded(op)]
    cpu = sum(1 for op in counted if op.index not in on_gpu)
    return cpu, {op.index: op.index in on_gpu for op in sg.ops}


def _attribute(
    sg: ir.Subgraph,
    shared: list[ir.Op],
    rejected: dict[tuple[int, int], list[str]],
    static: dict[tuple[int, int], bool] | None,
    counts: list[int],
    shapes: Sequence[Sequence[Any]] = (),
) -> tuple[set[int], str] | None:
    """The ops a line naming no tensor was about, and how they were told: of the ops it stands
    for, those reading a constant the log says the delegate cannot lay out (``shapes``: its
    [type, dims]), else those the static table keeps off the GPU, when rejecting just them (and
    every op other lines name) gives the summary's one CPU count; None when neither does."""
    if not shared or len(counts) != 1:
        return None
    unlaid = [[str(kind), list(dims)] for kind, dims in shapes]

    def reads_unlaid(op: ir.Op) -> bool:
        return any(
            t is not None and t.is_constant and [t.type_name, list(t.shape)] in unlaid
            for t in op.inputs
        )

    choosers: list[tuple[str, Any]] = []
    if unlaid:
        choosers.append(("read a constant the log says it cannot lay out as BHWC", reads_unlaid))
    if static is not None:
        choosers.append(
            (
                "the static table also keeps off the GPU",
                lambda op: static.get((sg.index, op.index)) is False,
            )
        )
    for why, pick in choosers:
        chosen = {op.index for op in shared if pick(op)}
        if not chosen or {op.type for op in shared} - {o.type for o in shared if o.index in chosen}:
            continue  # every line stands for at least one op
        dropped = {(sg.index, op.index) for op in shared if op.index not in chosen}
        trial = {k: v for k, v in rejected.items() if k not in dropped}
        if _count_cpu(sg, trial)[0] == counts[0]:
            return chosen, why
    return None


def _types(ops: Sequence[ir.Op]) -> str:
    return "/".join(dict.fromkeys(op.type for op in ops))


def _shared_lines(
    sg: ir.Subgraph, blocks: list[LogBlock], aliases: dict[str, str] | None
) -> list[ir.Op]:
    """Ops matched only by lines that name no tensor and stand for other ops too."""
    shared: dict[int, ir.Op] = {}
    named: set[int] = set()
    for block in blocks:
        for rejection in block.rejections:
            ops = matching_ops(rejection, sg.ops, aliases)
            if rejection.detail is None and len(ops) > 1:
                shared.update({op.index: op for op in ops})
            else:
                named.update(op.index for op in ops)
    return [op for index, op in shared.items() if index not in named]


# --- static vs probe ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Disagreement:
    """One op where the static verdict and the accelerator differ."""

    subgraph: int
    op_index: int
    op_type: str
    static_ok: bool
    probe_on_gpu: bool
    static_reasons: list[str]
    probe_reasons: list[str]


@dataclass
class Agreement:
    """``agree`` of ``total`` ops the probe spoke about; ``unknown`` ops it could not."""

    agree: int = 0
    total: int = 0
    unknown: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Share of the ops the probe spoke about where both verdicts agree (1.0 when none)."""
        return self.agree / self.total if self.total else 1.0


def compare(
    static: Sequence[OpVerdict], probed: dict[tuple[int, int], ProbeOpVerdict]
) -> Agreement:
    """Line up static verdicts with the probe's; ops the probe cannot speak about (missing or
    ``on_gpu=None``) count in ``unknown``, not as agreement."""
    result = Agreement()
    for verdict in static:
        seen = probed.get((verdict.subgraph_index, verdict.op_index))
        if seen is None or seen.on_gpu is None:
            result.unknown += 1
            continue
        result.total += 1
        if seen.on_gpu == verdict.placed:
            result.agree += 1
            continue
        result.disagreements.append(
            Disagreement(
                subgraph=verdict.subgraph_index,
                op_index=verdict.op_index,
                op_type=verdict.op_type,
                static_ok=verdict.ok,
                probe_on_gpu=seen.on_gpu,
                static_reasons=[f"{r.code}: {r.message}" for r in verdict.rejections],
                probe_reasons=list(seen.reasons),
            )
        )
    return result


def combine(agreements: Iterable[Agreement]) -> Agreement:
    """One Agreement summing several (e.g. one per model)."""
    total = Agreement()
    for one in agreements:
        total.agree += one.agree
        total.total += one.total
        total.unknown += one.unknown
        total.disagreements.extend(one.disagreements)
    return total
