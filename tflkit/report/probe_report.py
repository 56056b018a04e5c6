"""What the real accelerator (``check --probe``) and LiteRT.js (``check --probe-browser``) did
with a model, as parts of the ``check`` report (its ``probe`` and ``browser``): plain
dataclasses, serialised with the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
class SignatureProbe:
    """What the accelerator did with one signature of a multi-signature model compiled on its
    own (``check --probe``; an LLM graph's ``decode`` first). ``crash.op_index`` indexes that
    signature's subgraph (``subgraph``)."""

    signature: str
    subgraph: int
    status: str
    total_ops: int
    ops_on_gpu: int | None
    ops_on_cpu: int | None
    cpu_op_types: list[str]
    crash: CrashInfo | None
    error: str | None
    from_cache: bool

    def line(self) -> str:
        """One line: the signature, and what the accelerator did with it."""
        head = f"{self.signature} (subgraph {self.subgraph}, compiled alone)"
        if self.crash is not None:
            crash = self.crash
            where = f" at {crash.op_type} (op {crash.op_index})" if crash.op_type else ""
            return f"{head}: crashes{where}: {crash.message}"
        if self.status != "ok":
            return f"{head}: {self.status}: {self.error}"
        line = f"{head}: ok, {self.ops_on_gpu} of {self.total_ops} ops on GPU"
        if self.cpu_op_types:
            line += f", on CPU: {', '.join(self.cpu_op_types)}"
        return line + (" (cached)" if self.from_cache else "")


@dataclass
class ProbeInfo:
    status: str
    adapter: str | None
    software_gpu: bool | None
    #: Main-graph ops on the GPU / CPU per the accelerator (all and 0 when it compiled the model
    #: without leaving any op on the CPU); None only when it compiled nothing.
    ops_on_gpu: int | None
    ops_on_cpu: int | None
    crash: CrashInfo | None
    error: str | None
    from_cache: bool
    compile_seconds: float | None
    agree: int = 0
    compared: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)
    #: Whether the accelerator compiled the model (None: it crashed or timed out first).
    compiled: bool | None = None
    #: Whether the static "compiles / fails as a whole" claim matches the accelerator.
    model_agrees: bool | None = None
    #: A model with several signatures: each compiled alone, decode first.
    signatures: list[SignatureProbe] = field(default_factory=list)
    #: The accelerator's warnings that signal wrong values (``Shape mismatch in
    #: GpuModelBuilder``: a node computed at another shape than the model's).
    warnings: list[str] = field(default_factory=list)
    #: How the log was read where it does not name each op (a line standing for several ops).
    notes: list[str] = field(default_factory=list)

    @property
    def agreement_rate(self) -> float | None:
        return self.agree / self.compared if self.compared else None


@dataclass
class BrowserProbeInfo:
    """What LiteRT.js (WebGPU, ML Drift) in headless Chromium did with the model, beside the
    native accelerator: ``check --probe-browser ADAPTER``."""

    adapter: str
    status: str
    error: str | None
    webgpu_adapter: str | None
    fully_accelerated: bool | None
    ops_total: int | None
    ops_delegated: int | None
    #: The ops LiteRT.js left to its CPU path, as its console said: {op, reason}.
    cpu_fallback: list[dict[str, str]] = field(default_factory=list)
    #: Op types one runtime leaves to the CPU and the other does not, in a sentence each
    #: (empty when the native probe did not run or the two agree).
    differences: list[str] = field(default_factory=list)
