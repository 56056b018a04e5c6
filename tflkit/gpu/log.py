"""Parse what the LiteRT GPU accelerator writes on native stderr while it compiles a model.

Facts measured on ai-edge-litert 2.3.0 (WebGPU over Vulkan, Mesa lavapipe):

* The rejection block is one message::

      ERROR: Following operations are not supported by GPU delegate:
      ARG_MAX: Tensor type(INT64) is not supported. Identity
      LOG_SOFTMAX: Operation is not supported.
      1 operations will run on the GPU, and the remaining 5 operations will run on the CPU.

  A custom op's line starts ``CUSTOM <name>: `` (``CUSTOM TFLite_Detection_PostProcess:
  TFLite_Detection_PostProcess``); the op type of the line is the custom op's name.
  The delegate keeps a sorted *set* of ``(op type, message)`` pairs, so lines are in
  alphabetical order and identical pairs collapse: two LOG_SOFTMAX ops give one line. A line is
  a reason, not an op instance; the summary line counts op instances.
* When the reason is about a tensor, the message ends with that tensor's *name* (an input or
  output of the op that breaks the rule): ``MUL: Tensor dimensions must be less than 5. Reshape``
  names the MUL's 5-D input. The runtime renames a signature's input/output tensors to their
  signature names, so ``ARG_MAX: Tensor type(INT64) is not supported. out0`` names the int64
  model output whose signature name is ``out0`` (the flatbuffer name when there is no signature).
* With nothing delegated the summary reads ``No operations will run on the GPU, and all N
  operations will run on the CPU.``; a fully delegated model prints no summary at all.
* Each delegated partition logs ``Initializing WebGPU-based API from graph.``
* A shader WebGPU rejects logs ``E... environment.cc:105] Validation error: Error while parsing
  WGSL: ...`` (then "Invalid ShaderModule", "Invalid ComputePipeline"... for what depended on
  it), and the run goes on: the op never runs and its output keeps stale values, while the
  job reports success (measured: fp16 weights as a SELECT, CONCATENATION or PACK operand in
  fp32, ``tests/test_rule_fp16_constant_operands.py``). ``GpuLog.invalid_program`` keeps the
  first such line.
* A node whose output the accelerator computes at another shape than the model's logs ``W...
  gpu_model_builder.cc:3901] Shape mismatch in GpuModelBuilder::UpdateOutputTensors(output of
  convolution1x1(conv_generic)). Requested shape:{bhwdc, {1, 8, 8, 1, 64}} vs reference shape:
  {bhwdc, {1, 15, 15, 1, 64}}`` and runs on: a sign of wrong values (measured: a strided 1x1
  CONV_2D with int8 weights, a SAME TRANSPOSE_CONV padded otherwise, ``bench/int8_weights.py``;
  it also shows for forms that come out right). ``GpuLog.shape_mismatches`` keeps each such
  line.
* A constant the delegate cannot lay out as BHWC logs its description over several lines
  before the rejection block (``E... model_builder.cc:2678] {`` / ``type: FLOAT32`` / ``data:
  {...}`` / ``dims: [1,1,4,4,8]`` / ``} isn't ::ml_drift::BHWC-convertible.``): measured with
  ``MUL: Can't parse inputs with const tensors.``, a line that names no tensor, for a MUL by a
  5-D constant (``tests/test_probe_attribution.py``). ``GpuLog.unconvertible`` keeps each
  (type, dims): the constants, hence the ops, the line is about.
* A crash prints a glog fatal line (``F0000 ... model.cc:218] Check failed: !IsInput(consumer,
  value) Node 0 is already a consumer of the value 0``) and the process exits with status 1.
  ``Node``/``value`` are ids in the delegate's own graph, not TFLite op or tensor indices.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tflkit.jsonable import plain_fields

__all__ = [
    "Adapter",
    "GpuLog",
    "LogRejection",
    "matching_ops",
    "parse_gpu_log",
    "signature_aliases",
]

REJECTION_HEADER = "Following operations are not supported by GPU delegate:"
#: The accelerator's warning when a node's output is not at the model's shape.
SHAPE_MISMATCH = "Shape mismatch in GpuModelBuilder"
#: How WebGPU's validation errors start, in the accelerator's error lines.
VALIDATION_ERROR = "Validation error:"

_GLOG = re.compile(r"^([IWEF])\d{4} [\d:.]+\s+\d+ [^\]\s]+\] ?(.*)$")
#: Lines the probe worker itself writes around the runtime's output.
_WORKER = re.compile(r"^tflkit-probe: (?:compile|run) failed: (.*)$")
_LEVEL = re.compile(r"^(INFO|WARNING|ERROR|VERBOSE|DEBUG|FATAL): (?:\[[^\]]*\] ?)?(.*)$")
_ADAPTER = re.compile(
    r"Selected adapter: (?P<name>.*?), arch=(?P<arch>[^,]*), vendor=(?P<vendor>[^,]*), "
    r"backend=(?P<backend>[^,]*), adapterType=(?P<type>.*)$"
)
_SUMMARY = re.compile(
    r"(\d+) operations will run on the GPU, and the remaining (\d+) operations will run on the CPU"
)
_SUMMARY_NONE = re.compile(r"No operations will run on the GPU, and all (\d+) operations will run")
_REJECTION = re.compile(r"^(?P<op>[A-Za-z][\w.\-/]*):(?: (?P<msg>.*))?$")
_KERNEL = re.compile(r"Initializing [\w-]+-based API from graph")
_NODE = re.compile(r"\bNode (\d+)\b")
_UNCONVERTIBLE = re.compile(
    r"type: (\w+)\s+data: \{[^}]*\}\s+dims: \[([\d,\s]*)\]\s*\} isn't [\w:]*BHWC-convertible"
)
_LOG_WORDS = frozenset({"INFO", "WARNING", "ERROR", "VERBOSE", "DEBUG", "FATAL", "Warning"})

#: Known ways the accelerator gives up, most telling first: (kind, substring).
_FATALS: tuple[tuple[str, str], ...] = (
    ("no_adapter", "No adapters found"),
    ("delegate_failed", "Failed to modify graph with delegate"),
    ("not_accelerated", "Some ops are not accelerated"),
    ("load_failed", "Failed to load model"),
)


@dataclass(frozen=True)
class LogRejection:
    """One line of the rejection block: an op type and why the delegate refused it.

    ``detail`` is the tensor name the delegate appended to the reason, when it did.
    """

    op_type: str
    reason: str
    detail: str | None = None

    @property
    def tensor_name(self) -> str | None:
        """The tensor the reason is about (same as ``detail``)."""
        return self.detail


@dataclass(frozen=True)
class Adapter:
    """The GPU adapter the accelerator selected (``Selected adapter: ...``)."""

    name: str
    vendor: str
    backend: str
    adapter_type: str
    arch: str = ""

    @property
    def is_software(self) -> bool:
        """True for a software rasterizer such as Mesa lavapipe (llvmpipe)."""
        kind = f"{self.adapter_type} {self.arch}".lower()
        return "software" in kind or "cpu" in self.adapter_type.lower()


@dataclass
class GpuLog:
    """Everything tflkit reads from one accelerator log.

    ``ops_on_gpu``/``ops_on_cpu`` come from the first summary line (one per delegated subgraph,
    all in ``summaries``) and are None when the delegate printed none, which it does when it
    takes every op. ``gpu_kernels`` counts delegated partitions. ``fatal_kind`` is one of
    "check_failed", "fatal", "no_adapter", "delegate_failed", "not_accelerated", "load_failed";
    ``fatal_node`` is the delegate-graph node id a Check-failed message names.
    """

    rejections: list[LogRejection] = field(default_factory=list)
    ops_on_gpu: int | None = None
    ops_on_cpu: int | None = None
    adapter: Adapter | None = None
    fatal: str | None = None
    fatal_kind: str | None = None
    fatal_node: int | None = None
    dynamic_tensors: bool = False
    gpu_kernels: int = 0
    summaries: list[tuple[int, int]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: ``Shape mismatch in GpuModelBuilder`` warnings: a sign of wrong values.
    shape_mismatches: list[str] = field(default_factory=list)
    #: Constants the delegate could not lay out as BHWC: [type, dims] each.
    unconvertible: list[list[Any]] = field(default_factory=list)

    @property
    def invalid_program(self) -> str | None:
        """The first WebGPU validation error (a shader or pipeline WebGPU rejected), or None:
        when set, ops of the compiled model did not run and its outputs are not results."""
        return next((e for e in self.errors if e.startswith(VALIDATION_ERROR)), None)

    @property
    def rejected_op_types(self) -> list[str]:
        """Distinct rejected op types, in log order."""
        return list(dict.fromkeys(r.op_type for r in self.rejections))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (inverse of :meth:`from_dict`)."""
        return plain_fields(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GpuLog:
        """Rebuild from :meth:`to_dict` output."""
        data = dict(data)
        data["rejections"] = [LogRejection(**r) for r in data.get("rejections", [])]
        data["summaries"] = [tuple(s) for s in data.get("summaries", [])]
        if data.get("adapter") is not None:
            data["adapter"] = Adapter(**data["adapter"])
        return cls(**data)


def _message(line: str) -> tuple[str, str]:
    """Split a raw line into (severity letter or "", message without the logger prefix)."""
    m = _GLOG.match(line)
    if m:
        return m.group(1), m.group(2)
    m = _LEVEL.match(line)
    if m:
        return m.group(1)[0], m.group(2)
    m = _WORKER.match(line)
    if m:
        return "E", m.group(1)
    return "", line


def _split_reason(message: str) -> tuple[str, str | None]:
    """Separate a trailing tensor name (one token after the last sentence) from the reason."""
    head, sep, tail = message.rpartition(". ")
    if sep and tail and not any(c.isspace() for c in tail) and not tail.endswith("."):
        return head + ".", tail
    return message, None


def _rejection(message: str) -> LogRejection | None:
    if message.startswith("CUSTOM "):  # "CUSTOM TFLite_Detection_PostProcess: <reason>"
        message = message[len("CUSTOM ") :]
    m = _REJECTION.match(message)
    if m is None or m.group("op") in _LOG_WORDS:
        return None
    reason, detail = _split_reason((m.group("msg") or "").strip())
    return LogRejection(m.group("op"), reason, detail)


def parse_gpu_log(text: str) -> GpuLog:
    """Parse the accelerator's native log (stderr, optionally merged with stdout)."""
    log = GpuLog()
    in_block = False
    for raw in text.splitlines():
        line = raw.rstrip()
        severity, msg = _message(line)
        if REJECTION_HEADER in msg:
            in_block = True
            continue
        summary = _SUMMARY.search(msg)
        none = _SUMMARY_NONE.search(msg)
        if summary or none:
            pair = (int(summary[1]), int(summary[2])) if summary else (0, int(none[1]))
            log.summaries.append(pair)
            in_block = False
            continue
        if in_block:
            rej = _rejection(line) if not severity else None
            if rej is not None:
                log.rejections.append(rej)
                continue
            in_block = False
        _scan_line(log, severity, msg)
    if log.summaries:
        log.ops_on_gpu, log.ops_on_cpu = log.summaries[0]
    for kind, dims in _UNCONVERTIBLE.findall(text):
        found = [kind, [int(d) for d in dims.replace(" ", "").split(",") if d]]
        if found not in log.unconvertible:
            log.unconvertible.append(found)
    if log.fatal and log.fatal_kind == "check_failed":
        node = _NODE.search(log.fatal)
        log.fatal_node = int(node.group(1)) if node else None
    return log


def _scan_line(log: GpuLog, severity: str, msg: str) -> None:
    adapter = _ADAPTER.search(msg)
    if adapter and log.adapter is None:
        log.adapter = Adapter(
            name=adapter["name"].strip(),
            vendor=adapter["vendor"].strip(),
            backend=adapter["backend"].strip(),
            adapter_type=adapter["type"].strip(),
            arch=adapter["arch"].strip(),
        )
        return
    if _KERNEL.search(msg):
        log.gpu_kernels += 1
        return
    if SHAPE_MISMATCH in msg:
        log.shape_mismatches.append(msg.strip())
        return
    if "only supports static-sized tensors" in msg:
        log.dynamic_tensors = True
    if severity == "F" or "Check failed:" in msg:
        if log.fatal_kind != "check_failed":
            log.fatal = msg.strip()
            log.fatal_kind = "check_failed" if "Check failed:" in msg else "fatal"
        return
    if severity == "E" and msg.strip():
        log.errors.append(msg.strip())
    if log.fatal_kind in ("check_failed", "fatal"):
        return
    for rank, (kind, needle) in enumerate(_FATALS):
        if needle in msg:
            current = next((i for i, (k, _) in enumerate(_FATALS) if k == log.fatal_kind), None)
            if current is None or rank < current:
                log.fatal, log.fatal_kind = msg.strip(), kind
            return


def matching_ops(
    rejection: LogRejection, ops: Iterable[Any], aliases: Mapping[str, str] | None = None
) -> list[Any]:
    """The ops a rejection line can be about, among ``ops`` (tflkit IR ``Op`` objects).

    Ops of the rejected type that read or write the tensor the line names; when the line names
    no tensor, every op of that type (the delegate collapses identical lines into one). The
    runtime calls a signature's input/output tensors by their signature names: pass
    ``aliases`` (signature name -> tensor name, see :func:`signature_aliases`) to match those.
    """
    same_type = [op for op in ops if op.type == rejection.op_type]
    if rejection.detail is None:
        return same_type
    names = {rejection.detail}
    if aliases and rejection.detail in aliases:
        names.add(aliases[rejection.detail])
    return [
        op
        for op in same_type
        if any(t is not None and t.name in names for t in (*op.inputs, *op.outputs))
    ]


def signature_aliases(signature: Any) -> dict[str, str]:
    """Signature name -> tensor name for one IR ``SignatureDef`` (inputs and outputs)."""
    return {key: t.name for key, t in {**signature.inputs, **signature.outputs}.items()}
