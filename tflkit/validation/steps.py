"""``validate --steps N``: a KV-cache LLM graph run the way an app runs it, token by token.

A model made by litert-torch's generative API (and LiteRT-LM's converters) has a ``prefill_*``
signature (a prompt of tokens at positions 0..P-1) and a ``decode`` signature (one token at one
position), both taking the KV cache as inputs (``kv_cache_k_0``, ``kv_cache_v_0``, ...) and
returning the updated cache under the same names; ``decode`` returns ``logits`` too.
:func:`kv_program` finds that shape in a model.

:func:`run_steps` drives one backend: prefill on the prompt (all but its last token; the last
slot is padding that decode step 0 overwrites), then ``steps`` decode steps, each feeding the
cache outputs of the previous call back as inputs (matched by name) and one token at the next
position. Every backend is fed the same tokens (the CPU's greedy choices: teacher forcing), so
the logits of step k are comparable on every backend; each backend's own greedy token is
recorded next to them. The cache each backend feeds back is its own, so error accumulates the
way it does on a device.

Backends: ``cpu`` (the LiteRT Interpreter's signature runners, XNNPACK), ``cpu-ref`` (the same
with LiteRT's reference kernels: XNNPACK runs some composites with kernels of its own),
``cpu-fp16`` (tflkit's fp16 emulation, op by op, per signature), ``gpu-fp16`` and
``gpu-fp32`` (LiteRT's GPU accelerator through ``CompiledModel``, in a child process with a
timeout: :mod:`tflkit.validation._steps_worker`; a crash is a finding, not a crash of tflkit).
:func:`compare_steps` gives per step the max abs of the logits against the CPU, the greedy tokens
and the first step where they part.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.errors import UsageError
from tflkit.jsonable import plain

__all__ = [
    "KvProgram",
    "StepRun",
    "StepsReport",
    "compare_steps",
    "kv_program",
    "prompt_tokens",
    "run_steps",
    "steps_report",
    "validate_steps",
]

#: A backend call: (signature key, feeds by input name) -> outputs by output name.
Call = Callable[[str, Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]

GPU_RUNNERS = ("gpu-fp16", "gpu-fp32")
RUNNERS = ("cpu", "cpu-ref", "cpu-fp16", *GPU_RUNNERS)
#: A step "parts" when its logits differ from the CPU's by more than this fraction of the CPU
#: logits' largest magnitude (fp16 stores about 3 decimal digits), or when the greedy token
#: differs, or when a logit is not finite.
PART_FRACTION = {"gpu-fp16": 2e-2, "cpu-fp16": 2e-2, "gpu-fp32": 1e-4, "cpu-ref": 1e-4}


#: The dtypes of the attention mask tflkit builds (:func:`causal_mask`): additive, 0 up to the
#: position and the dtype's lowest value after it. For float32 that is the value litert-torch
#: 0.10's export bakes into its own mask cache (its ``causal_mask_value``, -inf, is
#: -3.4028235e38 in the graph's GATHER_ND constant); finite, so a masked logit stays finite.
MASK_DTYPES = ("float32", "float16")
#: Names a decode/prefill input is taken for the attention mask by.
MASK_NAMES = ("mask", "attention_mask", "causal_mask")
#: The prompt a decode-only model (no prefill signature) runs through ``decode`` token by token:
#: this many tokens, fewer when the cache is shorter.
DECODE_ONLY_PROMPT = 8


@dataclass(frozen=True)
class KvProgram:
    """Where a model's prefill/decode signatures keep their tokens, positions, mask and cache.

    ``prefill`` is ``None`` for a decode-only model: the prompt (``prefill_len`` tokens) then runs
    through ``decode`` one token at a time."""

    prefill: str | None
    decode: str
    prefill_len: int
    tokens: str
    positions: str
    logits: str
    vocab: int
    cache: tuple[str, ...]
    cache_len: int
    #: (shape, dtype) of every cache input (the same in both signatures)
    cache_specs: Mapping[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)
    #: per signature taking an attention mask: (input name, shape, dtype)
    mask_specs: Mapping[str, tuple[str, tuple[int, ...], str]] = field(default_factory=dict)
    #: per cache input: the axis the positions index (None when not found in the graph)
    seq_axes: Mapping[str, int | None] = field(default_factory=dict)
    #: how ``cache_len`` was found
    cache_len_from: str = ""

    @property
    def mask(self) -> str | None:
        """The decode signature's mask input, if it takes one."""
        spec = self.mask_specs.get(self.decode)
        return None if spec is None else spec[0]

    @property
    def prompt_calls(self) -> int:
        """Signature calls before decode step 0: one prefill, or a decode per prompt token."""
        return 1 if self.prefill is not None else self.prefill_len - 1

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "prefill": self.prefill,
                "decode": self.decode,
                "prefill_len": self.prefill_len,
                "tokens": self.tokens,
                "positions": self.positions,
                "logits": self.logits,
                "vocab": self.vocab,
                "cache": list(self.cache),
                "cache_len": self.cache_len,
                "cache_specs": {k: [list(s), d] for k, (s, d) in self.cache_specs.items()},
                "mask_specs": {k: [n, list(s), d] for k, (n, s, d) in self.mask_specs.items()},
                "seq_axes": dict(self.seq_axes),
                "cache_len_from": self.cache_len_from,
            }
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KvProgram:
        fields_ = dict(data)
        fields_["cache"] = tuple(fields_["cache"])
        fields_["cache_specs"] = {k: (tuple(s), d) for k, (s, d) in data["cache_specs"].items()}
        fields_["mask_specs"] = {
            k: (n, tuple(s), d) for k, (n, s, d) in data.get("mask_specs", {}).items()
        }
        return cls(**fields_)


def kv_program(model: Any) -> KvProgram:
    """The prefill/decode/KV-cache layout of ``model`` (an ``ir.Model``); ``UsageError`` saying
    what is missing, or which input tflkit cannot feed, when it is not a KV-cache LLM graph.

    Understands litert-torch's generative exports: ``prefill_*`` + ``decode`` or ``decode``
    alone, an attention mask input or none, any KV cache layout (the cache length from the mask's
    last axis, else from the axis the decode graph's DYNAMIC_UPDATE_SLICE writes one position
    into)."""
    sigs = {s.key: s for s in model.signatures}
    decode = next((k for k in sigs if k == "decode"), None) or next(
        (k for k in sigs if k.startswith("decode")), None
    )
    if decode is None:
        raise UsageError(
            "--steps needs a KV-cache LLM graph with a decode signature, and prefill_* ones or "
            f"none (litert-torch's generative export); this model has {sorted(sigs) or 'none'}"
        )
    dec = sigs[decode]
    prefills = sorted(
        (k for k in sigs if k.startswith("prefill") and "pixel" not in k and "lora" not in k),
        key=lambda k: _prefill_len(sigs[k]),
    )
    prefill = prefills[-1] if prefills else None
    pre = sigs[prefill] if prefill is not None else None
    cache = tuple(n for n in dec.inputs if n in dec.outputs and (pre is None or n in pre.inputs))
    tokens = next((n for n in ("tokens", "input_ids") if n in dec.inputs), None)
    positions = next((n for n in ("input_pos", "positions") if n in dec.inputs), None)
    logits = next((n for n in dec.outputs if n not in dec.inputs), None)
    missing = [
        what
        for what, found in (
            ("a KV cache fed back by name", cache),
            ("a tokens input", tokens),
            ("an input_pos input", positions),
            ("a logits output", logits),
        )
        if not found
    ]
    if missing:
        raise UsageError(f"--steps: the decode signature {decode!r} lacks " + ", ".join(missing))
    mask_specs = _mask_specs([s for s in (dec, pre) if s is not None], {*cache, tokens, positions})
    specs = {
        n: (tuple(int(d) for d in dec.inputs[n].shape), dec.inputs[n].dtype.name) for n in cache
    }
    seq_axes = {n: _update_axis(dec.inputs[n], model) for n in cache}
    cache_len, found_by = _cache_len(specs, seq_axes, mask_specs)
    prompt_len = _prefill_len(pre) if pre is not None else min(DECODE_ONLY_PROMPT, cache_len - 1)
    _check_mask_rows(mask_specs, decode, prompt_len, cache_len)
    return KvProgram(
        prefill=prefill,
        decode=decode,
        prefill_len=max(1, prompt_len),
        tokens=tokens,
        positions=positions,
        logits=logits,
        vocab=int(dec.outputs[logits].shape[-1]),
        cache=cache,
        cache_len=cache_len,
        cache_specs=specs,
        mask_specs=mask_specs,
        seq_axes=seq_axes,
        cache_len_from=found_by,
    )


_EXPECTED = (
    "tflkit feeds tokens/input_ids, input_pos/positions, a float attention mask "
    f"({'/'.join(MASK_NAMES)}: last axis the cache length) and the KV cache (inputs returned "
    "under the same name by decode)"
)


def _spec(tensor: Any) -> str:
    return f"{[int(d) for d in tensor.shape]} {tensor.dtype.name}"


def _mask_input(signature: Any, known: set[str]) -> tuple[str, tuple[int, ...], str] | None:
    """The signature's attention-mask input (name, shape, dtype), if it has one; ``UsageError``
    for a mask tflkit cannot build (not float, rank < 2)."""
    names = [n for n in signature.inputs if n not in known and "mask" in n.lower()]
    name = next((n for n in MASK_NAMES if n in names), None) or next(iter(names), None)
    if name is None:
        return None
    tensor = signature.inputs[name]
    shape = tuple(int(d) for d in tensor.shape)
    if tensor.dtype.name not in MASK_DTYPES or len(shape) < 2:
        raise UsageError(
            f"--steps: {signature.key}'s input {name!r} is {_spec(tensor)}; tflkit builds an "
            f"additive causal mask: {' or '.join(MASK_DTYPES)}, [..., queries, cache length]"
        )
    return name, shape, tensor.dtype.name


def _mask_specs(
    signatures: Sequence[Any], known: set[str]
) -> dict[str, tuple[str, tuple[int, ...], str]]:
    """Per signature taking one, its mask input; ``UsageError`` naming any input left over."""
    found = {}
    for sig in signatures:
        mask = _mask_input(sig, known)
        _check_inputs(sig.key, sig, known | ({mask[0]} if mask else set()))
        if mask is not None:
            found[sig.key] = mask
    return found


def _check_mask_rows(
    masks: Mapping[str, tuple[str, tuple[int, ...], str]], decode: str, prompt: int, cache: int
) -> None:
    """A mask's query axis (second last) is the signature's tokens (1 in decode)."""
    for key, (name, shape, _) in masks.items():
        rows = 1 if key == decode else prompt
        if shape[-2] != rows:
            raise UsageError(
                f"--steps: {key}'s mask input {name!r} {list(shape)}: tflkit builds an additive "
                f"causal mask [..., {rows}, {cache}] (queries x cache positions)"
            )


def _check_inputs(key: str, signature: Any, known: set[str]) -> None:
    other = [n for n in signature.inputs if n not in known]
    if other:
        what = ", ".join(f"{n!r} {_spec(signature.inputs[n])}" for n in other)
        raise UsageError(f"--steps: {key} takes {what}, which tflkit cannot feed: {_EXPECTED}")


def _update_axis(tensor: Any, model: Any) -> int | None:
    """The axis of cache input ``tensor`` that the graph writes positions into: where the
    update of the DYNAMIC_UPDATE_SLICE writing into it is shorter than the cache (one position
    in decode), followed into a composite's decomposition; None when there is no such op."""
    from tflkit.ir.composites import composite_of

    for op, slot in tensor.uses:
        if op.type == "DYNAMIC_UPDATE_SLICE" and slot == 0 and op.inputs[1] is not None:
            cache, update = tuple(tensor.shape), tuple(op.inputs[1].shape)
            shorter = [a for a, (c, u) in enumerate(zip(cache, update, strict=False)) if u < c]
            if len(shorter) == 1 and len(update) == len(cache):
                return shorter[0]
        info = composite_of(op) if op.type == "STABLEHLO_COMPOSITE" else None
        if info is not None and info.decomposition_subgraph is not None:
            graph = model.subgraphs[info.decomposition_subgraph]
            if slot < len(graph.inputs):
                axis = _update_axis(graph.inputs[slot], model)
                if axis is not None:
                    return axis
    return None


def _cache_len(
    specs: Mapping[str, tuple[tuple[int, ...], str]],
    seq_axes: Mapping[str, int | None],
    masks: Mapping[str, tuple[str, tuple[int, ...], str]],
) -> tuple[int, str]:
    """The cache length and how it was found: the mask's last axis, else the axis the graph
    writes positions into (the same length in every cache), else the longest cache axis (the
    old guess, right when the cache is longer than every other axis)."""
    lengths = {shape[-1] for _, shape, _ in masks.values()}
    if len(lengths) > 1:
        raise UsageError(f"--steps: the mask inputs disagree on the cache length: {masks}")
    written = {specs[n][0][a] for n, a in seq_axes.items() if a is not None}
    if lengths and written and written != lengths:
        raise UsageError(
            f"--steps: the mask inputs' last axis ({lengths.pop()}) is not the cache length the "
            f"graph writes positions into ({sorted(written)}): {masks}"
        )
    if lengths:
        return lengths.pop(), "the mask input's last axis"
    if len(written) == 1 and all(a is not None for a in seq_axes.values()):
        return written.pop(), "the cache axis DYNAMIC_UPDATE_SLICE writes the position into"
    return min(max(s) for s, _ in specs.values()), "the longest cache axis (a guess)"


def _prefill_len(signature: Any) -> int:
    tokens = signature.inputs.get("tokens") or next(iter(signature.inputs.values()))
    return int(tokens.shape[-1])


def prompt_tokens(program: KvProgram, seed: int = 0) -> np.ndarray:
    """A seeded prompt filling the prefill signature (token ids in 1..vocab-1)."""
    rng = np.random.default_rng(seed)
    return rng.integers(1, program.vocab, size=program.prefill_len).astype(np.int32)


def max_steps(program: KvProgram) -> int:
    """Decode steps that fit in the cache after the prompt."""
    return program.cache_len - program.prefill_len + 1


def causal_mask(
    shape: Sequence[int], dtype: str | np.dtype, positions: Sequence[int]
) -> np.ndarray:
    """An additive causal mask of ``shape`` (last two axes: queries, cache positions) and
    ``dtype``: query row t, at position ``positions[t]``, is 0 at every cache position up to and
    including it and the dtype's lowest value after it (:data:`MASK_DTYPES`; float32's is the
    value litert-torch bakes into its own masks)."""
    dtype = np.dtype(dtype)
    rows = np.asarray(positions, np.int64).reshape(-1, 1)
    block = np.where(np.arange(shape[-1])[None, :] <= rows, 0.0, np.finfo(dtype).min)
    return np.ascontiguousarray(np.broadcast_to(block.astype(dtype), tuple(shape)))


def _with_mask(
    program: KvProgram, key: str, feeds: dict[str, np.ndarray], positions: Sequence[int]
) -> dict[str, np.ndarray]:
    spec = program.mask_specs.get(key)
    if spec is not None:
        name, shape, dtype = spec
        feeds[name] = causal_mask(shape, dtype, positions)
    return feeds


def _run_prompt(
    call: Call, program: KvProgram, prompt: np.ndarray, cache: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The cache after ``prompt[:-1]``: one prefill call (a padding slot last, which decode step
    0 overwrites), or, with no prefill signature, one decode call per token."""
    p = program.prefill_len
    if program.prefill is None:
        for pos in range(p - 1):
            out = call(program.decode, _decode_feed(program, int(prompt[pos]), pos, cache))
            cache = {n: np.asarray(out[n]) for n in program.cache}
        return cache
    tokens = np.zeros((1, p), np.int32)
    tokens[0, : p - 1] = prompt[: p - 1]
    feeds = {program.tokens: tokens, program.positions: np.arange(p, dtype=np.int32), **cache}
    out = call(program.prefill, _with_mask(program, program.prefill, feeds, range(p)))
    return {n: np.asarray(out[n]) for n in program.cache}


def _decode_feed(
    program: KvProgram, token: int, pos: int, cache: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    feeds = {
        program.tokens: np.array([[token]], np.int32),
        program.positions: np.array([pos], np.int32),
        **cache,
    }
    return _with_mask(program, program.decode, feeds, [pos])


def run_steps(
    call: Call,
    program: KvProgram,
    prompt: np.ndarray,
    steps: int,
    forced: Sequence[int] | None = None,
) -> tuple[list[np.ndarray], list[int]]:
    """Prefill ``prompt[:-1]`` (or run it through decode token by token when the model has no
    prefill), then ``steps`` decode steps from ``prompt[-1]``: (the logits of every step, the
    greedy token of every step). With ``forced``, step k+1 is fed ``forced[k]`` instead of this
    backend's own greedy token."""
    p = program.prefill_len
    cache = {n: np.zeros(s, dtype=d) for n, (s, d) in program.cache_specs.items()}
    cache = _run_prompt(call, program, prompt, cache)
    token, logits_all, greedy = int(prompt[p - 1]), [], []
    for k in range(steps):
        out = call(program.decode, _decode_feed(program, token, p - 1 + k, cache))
        logits = np.asarray(out[program.logits], np.float32).reshape(-1)
        cache = {n: np.asarray(out[n]) for n in program.cache}
        logits_all.append(logits)
        greedy.append(int(np.argmax(np.where(np.isfinite(logits), logits, -np.inf))))
        token = greedy[-1] if forced is None else int(forced[k])
    return logits_all, greedy


def recording(call: Call, program: KvProgram, folder: Path) -> Call:
    """``call``, saving the feeds of every decode call to ``folder/step_K.npz`` (by input name):
    what ``--localize`` replays when step K parts (the cache this backend fed itself)."""
    folder.mkdir(parents=True, exist_ok=True)
    # a decode-only model's prompt calls come first: step 0 is the first call after them
    count = [0 if program.prefill is not None else 1 - program.prefill_len]

    def record(key: str, feeds: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        if key == program.decode:
            if count[0] >= 0:
                feeds_ = {k: np.asarray(v) for k, v in feeds.items()}
                np.savez(folder / f"step_{count[0]}.npz", **feeds_)
            count[0] += 1
        return call(key, feeds)

    return record


def recorded_feed(folder: Path, step: int) -> dict[str, np.ndarray]:
    """The decode feeds :func:`recording` saved for ``step``."""
    with np.load(folder / f"step_{step}.npz") as npz:
        return {k: np.array(npz[k]) for k in npz.files}


def cpu_call(model: bytes, kernels: str = "xnnpack") -> Call:
    """The LiteRT Interpreter's signature runners (CPU; XNNPACK, or LiteRT's ``reference``
    kernels) as a :data:`Call`."""
    from tflkit.delegates.litert_cpu import start_interpreter

    interpreter = start_interpreter(model, kernels=kernels)
    runners: dict[str, Any] = {}

    def call(key: str, feeds: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        if key not in runners:
            runners[key] = interpreter.get_signature_runner(key)
        return {k: np.array(v) for k, v in runners[key](**feeds).items()}

    return call


def fp16_call(model: bytes, hazards: list[list[dict[str, Any]]]) -> Call:
    """tflkit's fp16 emulation (:mod:`tflkit.delegates.fp16_emulation`: weights and every op's
    output rounded to fp16, op by op, on the CPU) per signature, as a :data:`Call`; the hazards
    of every call are appended to ``hazards`` (op index, type, what, signature)."""
    from tflkit.delegates.fp16_emulation import Fp16EmulationRunner

    runners: dict[str, Fp16EmulationRunner] = {}

    def call(key: str, feeds: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        if key not in runners:
            runners[key] = Fp16EmulationRunner(model, signature=key)
            runners[key].activate()
        outputs, found = runners[key].run_one(feeds)
        hazards.append([{**h.to_json(), "signature": key} for h in found])
        return outputs

    return call


@dataclass
class StepRun:
    """One backend's run: status, logits and greedy tokens per step, what executed."""

    runner: str
    status: str
    logits: list[np.ndarray] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    error: str | None = None
    executed: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class StepsReport:
    """What ``validate --steps`` found: per runner, per step."""

    model: str
    program: KvProgram
    prompt: list[int]
    steps: int
    cpu_tokens: list[int]
    runs: dict[str, dict[str, Any]]
    seconds: float
    #: ``--localize``: the ops of the parting step's decode call, run alone (or why not)
    localization: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """Every runner ran and none parted from the CPU."""
        return all(r["status"] == "ok" and r["first_part"] is None for r in self.runs.values())

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "kind": "validate_steps",
                "model": self.model,
                "ok": self.ok,
                "program": self.program.to_json(),
                "prompt": self.prompt,
                "steps": self.steps,
                "cpu_tokens": self.cpu_tokens,
                "runs": self.runs,
                "localization": self.localization,
                "fix": self.fix,
                "seconds": self.seconds,
            }
        )

    @property
    def fix(self) -> str | None:
        """What to do about a part: fp32 on the GPU when fp16 parts and fp32 holds (the fix
        LiteRT offers: the GPU options' fp32 precision), else what the parts say."""
        return fix_for(self.runs)

    def lines(self) -> list[str]:
        """The short terminal section."""
        out = [*_program_lines(self.model, self.steps, self.program)]
        out.append(f"cpu greedy tokens: {self.cpu_tokens}")
        for name, run in self.runs.items():
            if run["status"] != "ok":
                out.append(f"{name}: {run['status']}: {run.get('error') or ''}".rstrip())
                continue
            per = run["per_step"]
            worst = max(per, key=lambda s: s["max_abs"])
            part = run["first_part"]
            verdict = (
                "agrees with the CPU at every step"
                if part is None
                else f"parts from the CPU at step {part['step']} ({part['why']})"
            )
            out.append(
                f"{name}: {verdict}; max abs per step "
                + " ".join(_fmt(s["max_abs"]) for s in per)
                + f" (worst {_fmt(worst['max_abs'])} at step {worst['step']}); tokens "
                f"{'same' if run['tokens'] == self.cpu_tokens else run['tokens']}"
            )
            for note in run.get("notes", []):
                out.append(f"  {note}")
        loc = self.localization
        if loc is not None and loc.get("unavailable") and loc.get("step") is None:
            out.append(f"localization: {loc['unavailable']}")
        if self.fix is not None:
            out.append(f"fix: {self.fix}")
        return out


def fix_for(runs: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The fix a steps run points to, None when nothing parted.

    fp16 parting (on the GPU, or in the emulation) while the GPU in fp32 holds at every step is
    a precision problem with LiteRT's own fix: the GPU accelerator's options in fp32 precision
    (``GpuOptions(enforce_f32=True)`` in Python; the precision option of the GPU options in the
    other bindings). The GPU parting in fp32 too computes something else: no precision setting
    fixes that.
    """

    def parted(name: str) -> bool:
        run = runs.get(name)
        return run is not None and run["status"] == "ok" and run["first_part"] is not None

    fp16 = [name for name in ("gpu-fp16", "cpu-fp16") if parted(name)]
    fp32 = runs.get("gpu-fp32")
    if parted("gpu-fp32"):
        return (
            "the GPU parts from the CPU in fp32 too: not precision, a different computation "
            "(--localize names the first op where it parts)"
        )
    if not fp16:
        return None
    if fp32 is not None and fp32["status"] == "ok":
        return (
            "run the GPU in fp32 (LiteRT's GPU options, fp32 precision: enforce_f32); "
            f"gpu-fp32 agrees with the CPU at every step where {' and '.join(fp16)} part"
        )
    return f"{' and '.join(fp16)} part: add -r gpu-fp32 to see whether fp32 on the GPU holds"


def _program_lines(model: str, steps: int, p: KvProgram) -> list[str]:
    """How the steps run: prefill or the prompt through decode, the mask, the cache length."""
    cache = f"cache {', '.join(p.cache[:2])}... fed back by name"
    if p.prefill is not None:
        lines = [
            f"{model}: {steps} decode steps after a {p.prefill_len}-token prefill "
            f"({p.prefill} -> {p.decode}, {cache})"
        ]
    else:
        lines = [
            f"{model}: {steps} decode steps after a {p.prefill_len}-token prompt run through "
            f"{p.decode} one token per call (no prefill signature; {cache})"
        ]
    if p.mask_specs:
        shapes = ", ".join(f"{k} {list(s)}" for k, (_, s, _) in p.mask_specs.items())
        lines.append(
            f"mask input {p.mask or next(iter(p.mask_specs.values()))[0]!r} ({shapes}) built "
            f"every call: 0 up to the position, the dtype's lowest after it; cache length "
            f"{p.cache_len} from {p.cache_len_from}"
        )
    return lines


def _num(x: float | str) -> str:
    """A JSON number (``plain`` writes non-finite ones as strings) for a terminal line."""
    return x if isinstance(x, str) else f"{x:.3g}"


def _fmt(x: float) -> str:
    return "inf" if not np.isfinite(x) else f"{x:.2g}"


def compare_steps(
    name: str, run: StepRun, reference: StepRun, part_fraction: float
) -> dict[str, Any]:
    """Per step: max abs of the logits against ``reference``, both greedy tokens, whether the
    step parts; and the first step that parts."""
    result: dict[str, Any] = {
        "status": run.status,
        "error": run.error,
        "executed": run.executed,
        "seconds": run.seconds,
        "tokens": run.tokens,
        "per_step": [],
        "first_part": None,
        "part_fraction": part_fraction,
    }
    if run.status != "ok":
        return result
    for k, (got, want) in enumerate(zip(run.logits, reference.logits, strict=False)):
        finite = bool(np.isfinite(got).all())
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        max_abs = float(diff.max()) if finite else float("inf")
        scale = float(np.abs(want).max()) or 1.0
        token, ref_token = run.tokens[k], reference.tokens[k]
        step = {
            "step": k,
            "max_abs": max_abs,
            "max_rel_to_range": max_abs / scale,
            "token": token,
            "cpu_token": ref_token,
            "finite": finite,
        }
        result["per_step"].append(step)
        if result["first_part"] is None:
            why = None
            if not finite:
                why = "non-finite logits"
            elif token != ref_token:
                why = f"greedy token {token} != cpu {ref_token}"
            elif max_abs > part_fraction * scale:
                why = f"max abs {max_abs:.3g} > {part_fraction:g} x logit range {scale:.3g}"
            if why:
                result["first_part"] = {"step": k, "why": why}
    return result


def _cpu_run(
    data: bytes,
    program: KvProgram,
    prompt: np.ndarray,
    steps: int,
    forced: Sequence[int] | None = None,
    kernels: str = "xnnpack",
) -> StepRun:
    name = "cpu" if kernels == "xnnpack" else "cpu-ref"
    start = time.perf_counter()
    try:
        logits, tokens = run_steps(cpu_call(data, kernels), program, prompt, steps, forced)
    except Exception as exc:  # a runtime error is a finding
        return StepRun(name, "run_error", error=_line(exc))
    return StepRun(
        name,
        "ok",
        logits,
        tokens,
        executed={
            "runtime": "LiteRT Interpreter (signature runners)",
            "device": "CPU",
            "kernels": kernels,
        },
        seconds=time.perf_counter() - start,
    )


def _fp16_run(
    data: bytes, program: KvProgram, prompt: np.ndarray, steps: int, forced: Sequence[int]
) -> StepRun:
    start = time.perf_counter()
    hazards: list[list[dict[str, Any]]] = []
    try:
        logits, tokens = run_steps(fp16_call(data, hazards), program, prompt, steps, forced)
    except Exception as exc:
        return StepRun("cpu-fp16", "run_error", error=_line(exc))
    return StepRun(
        "cpu-fp16",
        "ok",
        logits,
        tokens,
        executed={
            "runtime": "LiteRT Interpreter, op by op",
            "device": "CPU",
            "precision": "fp16 (emulated: weights and every op output rounded)",
            # the prompt's calls (one prefill, or a decode per prompt token) first, then one
            # per decode step
            "prefill_hazards": [h for call in hazards[: program.prompt_calls] for h in call],
            "step_hazards": hazards[program.prompt_calls :],
        },
        seconds=time.perf_counter() - start,
    )


def _gpu_run(
    data: bytes,
    name: str,
    program: KvProgram,
    prompt: np.ndarray,
    steps: int,
    forced: Sequence[int],
    timeout: float,
    feeds_dir: Path | None = None,
) -> StepRun:
    from tflkit.gpu.log import parse_gpu_log
    from tflkit.proc.worker import run_worker

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tflkit-steps-") as tmp:
        folder = Path(tmp)
        (folder / "model.tflite").write_bytes(data)
        plan = {
            "program": program.to_json(),
            "prompt": [int(t) for t in prompt],
            "steps": steps,
            "forced": [int(t) for t in forced],
            "enforce_f32": name == "gpu-fp32",
            "feeds_dir": None if feeds_dir is None else str(feeds_dir),
        }
        (folder / "plan.json").write_text(json.dumps(plan))
        cmd = [sys.executable, "-m", "tflkit.validation._steps_worker", str(folder)]
        done = run_worker(cmd, cwd=folder, timeout=timeout)
        log = parse_gpu_log(done.output)
        result_file = folder / "result.json"
        state = json.loads(result_file.read_text()) if result_file.is_file() else {}
        executed = {
            "runtime": "LiteRT CompiledModel (signature by index)",
            "device": "GPU",
            "precision": "fp32" if name == "gpu-fp32" else "fp16",
            "fully_accelerated": state.get("fully_accelerated"),
            "adapter": None if log.adapter is None else log.adapter.name,
            "software_adapter": None if log.adapter is None else log.adapter.is_software,
            "cpu_fallback": sorted({r.op_type for r in log.rejections}),
            "stage": state.get("stage"),
        }
        seconds = time.perf_counter() - start
        if done.timed_out or (done.returncode or 0) < 0:
            status = "timeout" if done.timed_out else "crashed"
            where = state.get("stage", "start")
            error = f"the accelerator {done.how} during {where}: {log.fatal or done.last_line}"
            return StepRun(name, status, error=error, executed=executed, seconds=seconds)
        if state.get("status") != "ok":
            error = state.get("error") or log.fatal or done.last_line or done.how
            status = "compile_error" if state.get("stage") == "compile" else "run_error"
            return StepRun(name, status, error=error, executed=executed, seconds=seconds)
        if log.invalid_program is not None:  # it "ran", but some ops never did
            error = (
                "WebGPU rejected a shader the accelerator built, so some ops never ran and the "
                f"logits are not results ({log.invalid_program[:200]})"
            )
            return StepRun(name, "run_error", error=error, executed=executed, seconds=seconds)
        with np.load(folder / "logits.npz") as npz:
            logits = [npz[f"step_{k}"] for k in range(steps)]
    return StepRun(name, "ok", logits, state["tokens"], executed=executed, seconds=seconds)


def _new_hazards(per_step: list[list[dict[str, Any]]], step: int) -> list[dict[str, Any]]:
    """The hazards of decode step ``step`` that no earlier (agreeing) step had: the ops where
    the emulated fp16 run parts (a hazard every step has, such as the causal mask's -3.4e38
    becoming -inf, did not make the earlier steps part)."""
    seen = {(h["op_index"], h["what"]) for hazards in per_step[:step] for h in hazards}
    return [h for h in per_step[step] if (h["op_index"], h["what"]) not in seen]


def _named(model: Any, hazards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``hazards`` with the name of each op's first output (its place in the graph)."""
    graphs = {sig.key: sig.subgraph for sig in model.signatures}
    named = []
    for h in hazards:
        graph = graphs.get(h["signature"])
        ops = graph.ops if graph is not None else []
        index = h["op_index"]
        output = (
            ops[index].outputs[0].name if 0 <= index < len(ops) and ops[index].outputs else None
        )
        named.append({**h, "output": output})
    return named


def _composite_names(model: Any, signature: str) -> list[str]:
    from tflkit.ir.composites import composite_of

    graph = next(s.subgraph for s in model.signatures if s.key == signature)
    found = (composite_of(op) for op in graph.ops)
    return sorted({c.name for c in found if c is not None})


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


#: runners ``--localize`` localizes, in the order one is picked when several part (fp32 first:
#: a GPU that parts in fp32 computes something else, not just fewer digits). The fp16 emulation
#: names its own ops: the overflows new at its parting step (``first_part["ops"]``).
LOCALIZABLE = ("gpu-fp32", "gpu-fp16")


def steps_report(
    data: bytes,
    label: str,
    steps: int,
    *,
    runners: Sequence[str] = RUNNERS,
    seed: int = 0,
    timeout: float = 300.0,
    progress: Callable[[str], None] | None = None,
    localize: bool = False,
    localize_runner: str | None = None,
) -> StepsReport:
    """Run prefill + ``steps`` decode steps on the CPU and each GPU runner, compare per step.

    With ``localize``: on the first parting step of ``localize_runner`` (default: the first of
    :data:`LOCALIZABLE` that parts), every op of the decode signature run alone on that runner
    with the feeds that step was given (:func:`localize_step`)."""
    from tflkit import ir

    start = time.perf_counter()
    model = ir.load(data)
    program = kv_program(model)
    _check_request(program, steps, runners, localize_runner)
    prompt = prompt_tokens(program, seed)
    if progress:
        progress(f"cpu: prefill + {steps} decode steps")
    cpu = _cpu_run(data, program, prompt, steps)
    runs: dict[str, dict[str, Any]] = {}
    report = StepsReport(label, program, [int(t) for t in prompt], steps, [], runs, 0.0)
    if cpu.status != "ok":
        runs["cpu"] = compare_steps("cpu", cpu, cpu, 0.0)
        report.seconds = time.perf_counter() - start
        return report
    report.cpu_tokens = cpu.tokens
    with tempfile.TemporaryDirectory(prefix="tflkit-feeds-") as tmp:
        for name in runners:
            if name == "cpu":
                continue
            if progress:
                where = "op by op on the CPU" if name == "cpu-fp16" else "child process"
                progress(f"{name}: prefill + {steps} decode steps ({where})")
            keep = Path(tmp) / name if localize and name in LOCALIZABLE else None
            run = _run_one(data, name, program, prompt, steps, cpu.tokens, timeout, keep)
            runs[name] = compare_steps(name, run, cpu, PART_FRACTION[name])
            runs[name]["notes"] = _notes(model, program, name, run, runs[name])
        if localize:
            report.localization = _localize_parting(
                data, program, runs, Path(tmp), localize_runner, timeout, progress
            )
    report.seconds = time.perf_counter() - start
    return report


def _check_request(
    program: KvProgram, steps: int, runners: Sequence[str], localize_runner: str | None
) -> None:
    if not 1 <= steps <= max_steps(program):
        raise UsageError(
            f"--steps {steps}: the cache holds {program.cache_len} positions and the prompt "
            f"{program.prefill_len}, so 1..{max_steps(program)} decode steps fit"
        )
    unknown = [r for r in runners if r not in RUNNERS]
    if unknown:
        raise UsageError(f"--steps runs {', '.join(RUNNERS)}, not {unknown}")
    if localize_runner is not None and localize_runner not in LOCALIZABLE:
        raise UsageError(
            f"--localize-on with --steps works on {', '.join(LOCALIZABLE)}, not {localize_runner}"
        )
    if localize_runner is not None and localize_runner not in runners:
        raise UsageError(f"--localize-on {localize_runner}: add it to the runners (-r)")


def _run_one(
    data: bytes,
    name: str,
    program: KvProgram,
    prompt: np.ndarray,
    steps: int,
    forced: Sequence[int],
    timeout: float,
    feeds_dir: Path | None,
) -> StepRun:
    if name == "cpu-fp16":
        return _fp16_run(data, program, prompt, steps, forced)
    if name == "cpu-ref":
        return _cpu_run(data, program, prompt, steps, forced, kernels="reference")
    return _gpu_run(data, name, program, prompt, steps, forced, timeout, feeds_dir)


def _notes(
    model: Any, program: KvProgram, name: str, run: StepRun, result: dict[str, Any]
) -> list[str]:
    """The terminal notes of one runner: overflowing ops (fp16 emulation), composites at a
    compile crash, the adapter, what the accelerator left to the CPU."""
    notes: list[str] = []
    part = result["first_part"]
    if name == "cpu-fp16" and part is not None:
        part["ops"] = _named(model, _new_hazards(run.executed["step_hazards"], part["step"]))
        for h in part["ops"][:3]:
            notes.append(
                f"step {part['step']}: op #{h['op_index']} {h['op_type']} ({h['signature']}, "
                f"output {h['output']}): {h['what']}"
            )
    if run.status in ("crashed", "compile_error") and run.executed.get("stage") == "compile":
        composites = _composite_names(model, program.decode)
        if composites:
            notes.append(
                f"the decode graph has STABLEHLO_COMPOSITE ops ({', '.join(composites)}); "
                "LiteRT's GPU accelerator has been seen to crash compiling them: "
                "`tflkit check --probe` locates the op"
            )
    if run.executed.get("software_adapter"):
        notes.append(f"software GPU adapter ({run.executed.get('adapter')})")
    fallback = run.executed.get("cpu_fallback")
    if fallback:
        notes.append("ops left to the CPU by the accelerator: " + ", ".join(fallback))
    return notes


def _localize_parting(
    data: bytes,
    program: KvProgram,
    runs: Mapping[str, dict[str, Any]],
    feeds_root: Path,
    wanted: str | None,
    timeout: float,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    """Localize the first parting step of ``wanted`` (or of the first parting runner of
    :data:`LOCALIZABLE`); the result also goes into that runner's ``first_part``."""
    parted = [n for n in LOCALIZABLE if n in runs and runs[n]["first_part"] is not None]
    name = wanted or next(iter(parted), None)
    if name is None or name not in parted:
        ran = ", ".join(n for n in LOCALIZABLE if n in runs)
        if name:
            why = f"{name} did not part from the CPU"
        elif ran:
            why = f"no GPU runner ({ran}) parted from the CPU"
        else:
            why = f"no GPU runner ran (--localize localizes {', '.join(LOCALIZABLE)})"
        return {"runner": name, "unavailable": f"nothing to localize: {why}"}
    run = runs[name]
    step = int(run["first_part"]["step"])
    if progress:
        progress(f"localizing {name} at step {step}: every op of {program.decode} on its own")
    try:
        feed = recorded_feed(feeds_root / name, step)
        found = localize_step(data, program.decode, feed, name, timeout)
    except Exception as exc:  # a localization that cannot run is a finding, not a crash
        found = {"runner": name, "unavailable": f"localization failed: {_line(exc)}"}
    found.update(step=step)
    run["first_part"]["localization"] = found
    run["notes"].extend(_localization_lines(found))
    return found


def localize_step(
    data: bytes, signature: str, feed: Mapping[str, np.ndarray], runner: str, timeout: float
) -> dict[str, Any]:
    """Every op of ``signature`` alone on ``runner`` against the CPU, fed ``feed`` (one decode
    call's inputs by name): :func:`tflkit.validation.localize.localize_signature` at the
    runner's own tolerance, as JSON with the first divergent op and the culprits spelled out."""
    from tflkit import ir
    from tflkit.compare.tolerances import DEFAULTS, tolerance_for
    from tflkit.validation.localize import localize_signature

    precision = "fp16" if runner in ("gpu-fp16", "cpu-fp16") else "fp32"
    threshold = tolerance_for(runner, "cpu").rtol or DEFAULTS[precision].rtol
    loc = localize_signature(
        data, signature, feed, runner=runner, threshold=threshold, timeout=timeout
    )
    graph = ir.load(data).signature(signature).subgraph
    out = loc.to_json()
    first = loc.first_divergent
    out.update(
        signature=signature,
        fed="the decode inputs this runner was given at that step (its own cache)",
        first_divergent_op=None if first is None else _op_json(first, graph, signature),
        culprit_ops=[_op_json(c, graph, signature) for c in loc.culprits],
    )
    return out


def _op_json(record: Any, graph: Any, signature: str) -> dict[str, Any]:
    """A localized op's record with its signature and the shapes of its inputs (``c`` marks a
    constant): what a static rule needs to recognise the pattern."""
    data = record.to_json()
    op = graph.ops[record.op_index]
    data["signature"] = signature
    data["inputs"] = [
        None
        if t is None
        else {"shape": [int(d) for d in t.shape], "dtype": t.type_name, "constant": t.is_constant}
        for t in op.inputs
    ]
    return data


def _localization_lines(found: Mapping[str, Any]) -> list[str]:
    """Terminal lines of a step localization."""
    if found.get("unavailable"):
        return [f"step {found['step']} not localized: {found['unavailable']}"]
    first = found.get("first_divergent_op")
    head = (
        f"step {found['step']} localized ({found['signature']} call replayed with its own "
        f"feeds, every op alone vs the CPU, threshold {found['threshold']:g} of the op's peak): "
    )
    if first is None:
        return [head + "no op parts on its own: the difference builds up over many ops"]
    lines = [head + "first op where it parts: " + _op_line(first)]
    for op in found["culprit_ops"][:3]:
        if op["op_index"] != first["op_index"]:
            lines.append("  also: " + _op_line(op))
    return lines


def _op_line(op: Mapping[str, Any]) -> str:
    iso = op.get("isolated") or {}
    what = (
        f"isolated max abs {_num(iso['max_abs'])} ({_num(iso['score'])} x its output's peak "
        f"{_num(iso['peak'])})"
        if iso
        else f"{op['status']}: {op.get('error') or ''}"
    )
    if op.get("hazards"):
        what += "; " + op["hazards"][0]
    outputs = op.get("outputs") or ["?"]
    shapes = " x ".join(
        ("const " if t["constant"] else "") + str(t["shape"]).replace(" ", "")
        for t in op.get("inputs") or []
        if t is not None
    )
    name = outputs[0] if len(outputs[0]) <= 60 else "..." + outputs[0][-57:]
    return (
        f"op #{op['op_index']} {op['op_type']} {shapes} ({op['signature']}, output {name}): {what}"
    )


def validate_steps(model_path: str | Path, options: Any) -> StepsReport:
    """``validate --steps``: :func:`steps_report` with a :class:`ValidateOptions`' steps, runners
    (default: cpu, cpu-ref, cpu-fp16, gpu-fp16, gpu-fp32), seed, timeout, progress, localize
    and localize runner (``--localize``, ``--localize-on``)."""
    from tflkit import ir

    if options.repro is not None:
        raise UsageError("--repro works with the ordinary validate, not with --steps yet")
    data, label = ir.serde.read_model_bytes(model_path)
    return steps_report(
        data,
        label,
        int(options.steps),
        runners=tuple(options.runners) or RUNNERS,
        seed=options.seed,
        timeout=options.timeout,
        progress=options.progress,
        localize=bool(options.localize),
        localize_runner=options.localize_runner,
    )
