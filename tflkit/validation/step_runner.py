"""``validate --steps`` backends: a KV-cache program run step by step through the one runner
protocol (:mod:`tflkit.delegates.base`).

:func:`run_steps` drives one backend: prefill on the prompt (all but its last token; the last
slot is padding that decode step 0 overwrites), then ``steps`` decode steps, each feeding the
cache outputs of the previous call back as inputs (matched by name) and one token at the next
position. With ``forced`` tokens (the CPU's greedy choices: teacher forcing) every backend is fed
the same tokens, so the logits of step k are comparable; each backend's own greedy token is
recorded next to them. The cache each backend feeds back is its own, so error accumulates the way
it does on a device.

:func:`step_runner` makes the runner a spec names do that: :class:`StepRunner` in this process
(the CPU interpreter's signature runners with XNNPACK or LiteRT's reference kernels, the fp16
emulation per signature) and :class:`GpuStepRunner` (LiteRT's GPU accelerator through
``CompiledModel``, in a child process with a timeout: :mod:`tflkit.validation._steps_worker`; a
crash is a finding, not a crash of tflkit). Their one input set is the prompt
(:func:`prompt_feed`); their outputs one dict per decode step: ``logits`` and the greedy
``token``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.delegates.base import BuildRequest, Feed, RunnerSpec, RunResult
from tflkit.delegates.registry import build
from tflkit.validation.llm_program import KvProgram, causal_mask

__all__ = [
    "Call",
    "GpuStepRunner",
    "StepRunner",
    "cpu_call",
    "logits_of",
    "prompt_feed",
    "recorded_feed",
    "recording",
    "run_steps",
    "step_runner",
    "tokens_of",
]

#: A backend call: (signature key, feeds by input name) -> outputs by output name.
Call = Callable[[str, Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


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
    """The cache after ``prompt[:-1]``: one prefill call, or, with no prefill signature, one
    decode call per token. A prompt shorter than the prefill signature is padded as LiteRT-LM
    pads it: its tokens at positions 0.., the padding slots (token 0) at the positions after
    them, which the decode steps overwrite before the causal mask lets anything read them."""
    p = program.prompt_length
    if program.prefill is None:
        for pos in range(p - 1):
            out = call(program.decode, _decode_feed(program, int(prompt[pos]), pos, cache))
            cache = {n: np.asarray(out[n]) for n in program.cache}
        return cache
    width = program.prefill_len
    tokens = np.zeros((1, width), np.int32)
    tokens[0, : p - 1] = prompt[: p - 1]
    feeds = {program.tokens: tokens, program.positions: np.arange(width, dtype=np.int32), **cache}
    out = call(program.prefill, _with_mask(program, program.prefill, feeds, range(width)))
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
    p = program.prompt_length
    if len(prompt) != p:
        raise ValueError(f"a {len(prompt)}-token prompt for a program of {p}")
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
    count = [0 if program.prefill is not None else 1 - program.prompt_length]

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
    """The CPU interpreter's signature runners (XNNPACK, or LiteRT's ``reference`` kernels) as
    a :data:`Call`: :meth:`LiteRTCpuRunner.run_signature` of one activated runner."""
    from tflkit.delegates.litert_cpu import LiteRTCpuRunner

    runner = LiteRTCpuRunner(model, kernels=kernels)
    runner.activate()
    return runner.run_signature


def prompt_feed(prompt: np.ndarray, forced: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """The one input set of a step runner: the prompt's tokens and, for teacher forcing, the
    token each decode step after the first is fed."""
    feed = {"prompt": np.asarray(prompt, np.int32)}
    if forced is not None:
        feed["forced"] = np.asarray(forced, np.int32)
    return feed


def _unpack(feeds: Sequence[Feed]) -> tuple[np.ndarray, list[int] | None]:
    if len(feeds) != 1:
        raise ValueError(f"a step runner runs one prompt, got {len(feeds)} input sets")
    forced = feeds[0].get("forced")
    return np.asarray(feeds[0]["prompt"]), None if forced is None else [int(t) for t in forced]


def _step_outputs(logits: list[np.ndarray], tokens: list[int]) -> list[dict[str, np.ndarray]]:
    return [{"logits": v, "token": np.int64(t)} for v, t in zip(logits, tokens, strict=True)]


def logits_of(result: RunResult) -> list[np.ndarray]:
    """The logits of every decode step of a step runner's result."""
    return [np.asarray(out["logits"]) for out in result.outputs]


def tokens_of(result: RunResult) -> list[int]:
    """The greedy token of every decode step of a step runner's result."""
    return [int(out["token"]) for out in result.outputs]


class StepRunner:
    """A KV-cache program on an in-process runner of the registry: the CPU interpreter (one
    interpreter, a signature runner per signature) or the fp16 emulation (one per signature,
    whose hazards of every call it records). Everything starts in :meth:`infer`, so a model the
    runtime refuses is the run's error, as on the GPU."""

    def __init__(self, spec: RunnerSpec, model: bytes, program: KvProgram, steps: int) -> None:
        self.name = spec.name
        self.spec = spec
        self.model = model
        self.program = program
        self.steps = steps
        self._runners: dict[str | None, Any] = {}
        self._hazards: list[list[dict[str, Any]]] = []

    def activate(self) -> None:
        """Nothing yet: the first call of each signature starts its runner."""

    def _call(self, key: str, feed: Mapping[str, np.ndarray]) -> Mapping[str, np.ndarray]:
        slot = key if self.spec.emulated else None  # the emulation runs one signature each
        runner = self._runners.get(slot)
        if runner is None:
            runner = self._runners[slot] = build(self.spec, BuildRequest(self.model, slot))
            runner.activate()
        if not self.spec.emulated:
            return runner.run_signature(key, feed)
        outputs, found = runner.run_one(feed)
        self._hazards.append([{**h.to_json(), "signature": key} for h in found])
        return outputs

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        prompt, forced = _unpack(feeds)
        self._hazards = []
        logits, tokens = run_steps(self._call, self.program, prompt, self.steps, forced)
        return RunResult(
            self.name, "ok", outputs=_step_outputs(logits, tokens), executed=self._executed()
        )

    def _executed(self) -> dict[str, Any]:
        if not self.spec.emulated:
            return {
                "runtime": "LiteRT Interpreter (signature runners)",
                "device": "CPU",
                "kernels": self.spec.kernels,
            }
        calls = self.program.prompt_calls
        return {
            "runtime": "LiteRT Interpreter, op by op",
            "device": "CPU",
            "precision": "fp16 (emulated: weights and every op output rounded)",
            # the prompt's calls (one prefill, or a decode per prompt token) first, then one
            # per decode step
            "prefill_hazards": [h for call in self._hazards[:calls] for h in call],
            "step_hazards": self._hazards[calls:],
        }

    def deactivate(self) -> None:
        for runner in self._runners.values():
            runner.deactivate()
        self._runners = {}


class GpuStepRunner:
    """A KV-cache program on LiteRT's GPU accelerator (the spec's precision), compiled once in a
    child process with a timeout (:mod:`tflkit.validation._steps_worker`); with ``feeds_dir``
    the child saves every decode call's feeds there (:func:`recording`)."""

    def __init__(
        self,
        spec: RunnerSpec,
        model: bytes,
        program: KvProgram,
        steps: int,
        *,
        timeout: float = 300.0,
        feeds_dir: Path | None = None,
    ) -> None:
        self.name = spec.name
        self.spec = spec
        self.model = model
        self.program = program
        self.steps = steps
        self.timeout = timeout
        self.feeds_dir = feeds_dir

    def activate(self) -> None:
        """Nothing to do here: the child compiles, so a crash cannot reach this process."""

    def infer(self, feeds: Sequence[Feed]) -> RunResult:
        from tflkit.proc.worker import run_worker

        prompt, forced = _unpack(feeds)
        with tempfile.TemporaryDirectory(prefix="tflkit-steps-") as tmp:
            folder = Path(tmp)
            (folder / "model.tflite").write_bytes(self.model)
            plan = {
                "program": self.program.to_json(),
                "prompt": [int(t) for t in prompt],
                "steps": self.steps,
                "forced": forced,
                "enforce_f32": self.spec.precision == "fp32",
                "feeds_dir": None if self.feeds_dir is None else str(self.feeds_dir),
            }
            (folder / "plan.json").write_text(json.dumps(plan))
            cmd = [sys.executable, "-m", "tflkit.validation._steps_worker", str(folder)]
            done = run_worker(cmd, cwd=folder, timeout=self.timeout)
            return self._result(folder, done)

    def _result(self, folder: Path, done: Any) -> RunResult:
        """The child's record as a result: what it died of, refused, or computed."""
        from tflkit.delegates.litert_gpu import invalid_shader
        from tflkit.gpu.log import parse_gpu_log

        log = parse_gpu_log(done.output)
        result_file = folder / "result.json"
        state = json.loads(result_file.read_text()) if result_file.is_file() else {}
        executed = {
            "runtime": "LiteRT CompiledModel (signature by index)",
            "device": "GPU",
            "precision": self.spec.precision,
            "fully_accelerated": state.get("fully_accelerated"),
            "adapter": None if log.adapter is None else log.adapter.name,
            "software_adapter": None if log.adapter is None else log.adapter.is_software,
            "cpu_fallback": sorted({r.op_type for r in log.rejections}),
            "stage": state.get("stage"),
        }
        status, error = "ok", None
        if done.timed_out or (done.returncode or 0) < 0:
            status = "timeout" if done.timed_out else "crashed"
            where = state.get("stage", "start")
            error = f"the accelerator {done.how} during {where}: {log.fatal or done.last_line}"
        elif state.get("status") != "ok":
            error = state.get("error") or log.fatal or done.last_line or done.how
            status = "compile_error" if state.get("stage") == "compile" else "run_error"
        elif log.invalid_program is not None:  # it "ran", but some ops never did
            status, error = "run_error", invalid_shader(log.invalid_program, "logits")
        if status != "ok":
            return RunResult(self.name, status, error=error, executed=executed)
        with np.load(folder / "logits.npz") as npz:
            logits = [npz[f"step_{k}"] for k in range(self.steps)]
        outputs = _step_outputs(logits, [int(t) for t in state["tokens"]])
        return RunResult(self.name, "ok", outputs=outputs, executed=executed)

    def deactivate(self) -> None:
        """Nothing held: the child process is gone."""


def step_runner(
    spec: RunnerSpec, model: bytes, program: KvProgram, steps: int, **gpu: Any
) -> StepRunner | GpuStepRunner:
    """The step runner of ``spec`` (a runner whose spec says it runs ``--steps``); ``gpu``: the
    keyword arguments of :class:`GpuStepRunner` (``timeout``, ``feeds_dir``), for a GPU spec."""
    if not spec.steps:
        raise ValueError(f"{spec.name} does not run a program step by step")
    if spec.device == "gpu":
        return GpuStepRunner(spec, model, program, steps, **gpu)
    return StepRunner(spec, model, program, steps)
