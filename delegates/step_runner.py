"""``validate --steps`` backends: a KV-cache program run step by step through the one runner
protocol (:mod:`tflkit.delegates.protocol`).

Every backend runs the one step loop, :func:`tflkit.delegates.kv_steps.run_steps` (prefill, then
decode steps feeding its own cache back; with ``forced`` tokens, teacher forcing).

:func:`step_runner` (what :func:`tflkit.delegates.registry.build` calls for a request with
``steps``) makes the runner a spec names do that: :class:`StepRunner` in this process
(the CPU interpreter's signature runners with XNNPACK or LiteRT's reference kernels, the fp16
emulation per signature) and :class:`GpuStepRunner` (LiteRT's GPU accelerator through
``CompiledModel``, in a child process with a timeout: :mod:`tflkit.delegates._steps_worker`; a
crash is a finding, not a crash of tflkit). Their one input set is the prompt
(:func:`prompt_feed`); their outputs one dict per decode step: ``logits`` and the greedy
``token``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .kv_steps import KvProgram, run_steps
from .protocol import BuildRequest, Feed, RunnerSpec, RunResult

__all__ = [
    "GpuStepRunner",
    "StepRunner",
    "prompt_feed",
    "step_runner",
]


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
            assert self.spec.factory is not None  # the spec's own runner, one per signature
            runner = self._runners[slot] = self.spec.factory(
                self.spec, BuildRequest(self.model, slot)
            )
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
    child process with a timeout (:mod:`tflkit.delegates._steps_worker`); with ``feeds_dir``
    the child saves every decode call's feeds there
    (:func:`tflkit.delegates.kv_steps.recording`)."""

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
        from tflkit.delegates import _steps_worker
        from tflkit.proc.worker import spawn_python

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
            done = spawn_python(_steps_worker.main, folder, cwd=folder, timeout=self.timeout)
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


def step_runner(spec: RunnerSpec, request: BuildRequest) -> StepRunner | GpuStepRunner:
    """The step runner of ``spec`` (a runner whose spec says it runs ``--steps``) on
    ``request``'s model and :class:`~tflkit.delegates.protocol.StepPlan`: on a GPU, in a child
    process with ``request.timeout`` (the plan's ``feeds_dir`` keeps each decode call's feeds)."""
    plan = request.steps
    if not spec.steps or plan is None:
        raise ValueError(f"{spec.name} does not run a program step by step")
    if spec.device == "gpu":
        return GpuStepRunner(
            spec,
            request.model,
            plan.program,
            plan.steps,
            timeout=request.timeout,
            feeds_dir=plan.feeds_dir,
        )
    return StepRunner(spec, request.model, plan.program, plan.steps)
