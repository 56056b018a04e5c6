"""The ``check`` report: plain dataclasses, serialisable with ``to_json`` (``tflkit.check/1``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

CHECK_SCHEMA = "tflkit.check/1"


@dataclass
class ReasonInfo:
    code: str
    message: str
    fatal: bool = False


@dataclass
class FixHint:
    """A rewrite rule that fixes the op, or a sentence when no rule does."""

    rule: str | None
    summary: str


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
    bytes: int
    direction: str
    kind: str


@dataclass
class CrashInfo:
    op_index: int | None
    op_type: str | None
    message: str | None


@dataclass
class Disagreement:
    subgraph: int
    op_index: int
    op_type: str
    static_ok: bool
    probe_on_gpu: bool | None
    static_reasons: list[str]
    probe_reasons: list[str]


@dataclass
class ProbeInfo:
    status: str
    adapter: str | None
    software_gpu: bool | None
    ops_on_gpu: int | None
    ops_on_cpu: int | None
    crash: CrashInfo | None
    error: str | None
    from_cache: bool
    compile_seconds: float | None
    agree: int = 0
    compared: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def agreement_rate(self) -> float | None:
        return self.agree / self.compared if self.compared else None


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
    internal_transfer_bytes: int
    io_transfer_bytes: int
    ops: list[OpCheck]
    partitions: list[PartitionInfo]
    transfers: list[TransferInfo]
    issues: list[ReasonInfo]
    probe: ProbeInfo | None = None

    @property
    def cpu_ops(self) -> int:
        return self.total_ops - self.gpu_ops

    @property
    def offending_ops(self) -> list[OpCheck]:
        return [op for op in self.ops if not op.on_gpu]

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["cpu_ops"] = self.cpu_ops
        data["gpu_flops_share"] = self.flops_gpu / self.flops_total if self.flops_total else None
        if self.probe is not None:
            data["probe"]["agreement_rate"] = self.probe.agreement_rate
        return {"schema": CHECK_SCHEMA, **data}
