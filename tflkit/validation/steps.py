"""``validate --steps N``: a KV-cache LLM graph run the way an app runs it, token by token.

:func:`tflkit.validation.llm_program.kv_program` finds the prefill/decode program;
:func:`steps_report` runs it on the CPU (the reference) and on every other runner asked for, each
a step runner of the one runner protocol (:mod:`tflkit.delegates.step_runner`) built from its
spec in the registry: ``cpu`` (the LiteRT Interpreter's signature runners, XNNPACK), ``cpu-ref``
(the same with LiteRT's reference kernels: XNNPACK runs some composites with kernels of its
own), ``cpu-fp16`` (tflkit's fp16 emulation, op by op, per signature), ``gpu-fp16`` and
``gpu-fp32`` (LiteRT's GPU accelerator in a child process). Every runner is fed the CPU's greedy
tokens (teacher forcing), so the logits of step k are comparable on every runner;
:func:`~tflkit.validation.step_compare.compare_steps` gives per step the max abs of the logits
against the CPU, the greedy tokens and the first step where they part;
:mod:`tflkit.validation.step_localize` replays a parting step op by op (``--localize``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tflkit.compare.steps import tokens_of
from tflkit.delegates.base import (
    BuildRequest,
    RunnerSpec,
    RunResult,
    StepPlan,
    execute,
    find_spec,
    runner_spec,
    spec_names,
)
from tflkit.delegates.kv_steps import Call, recorded_feed, recording, run_steps
from tflkit.delegates.registry import build
from tflkit.delegates.step_runner import prompt_feed
from tflkit.errors import UsageError
from tflkit.report.progress import quiet
from tflkit.validation.llm_program import (
    KvProgram,
    causal_mask,
    kv_program,
    prompt_tokens,
    with_prompt,
)
from tflkit.validation.step_compare import PART_FRACTION, StepsReport, compare_steps, fix_for
from tflkit.validation.step_localize import LOCALIZABLE, localize_parting, localize_step
from tflkit.validation.subject import run_stages

__all__ = [
    "LOCALIZABLE",
    "RUNNERS",
    "KvProgram",
    "StepsReport",
    "StepsSubject",
    "causal_mask",
    "compare_steps",
    "cpu_call",
    "fix_for",
    "kv_program",
    "localize_step",
    "prompt_tokens",
    "recorded_feed",
    "recording",
    "run_steps",
    "steps_report",
    "with_prompt",
]

#: the runners ``--steps`` runs (their spec says so), the first the CPU every other is held to
RUNNERS = spec_names(steps=True)


def cpu_call(model: bytes, kernels: str = "xnnpack") -> Call:
    """The CPU interpreter's signature runners (XNNPACK, or LiteRT's ``reference`` kernels) as
    a :data:`~tflkit.delegates.kv_steps.Call`: ``run_signature`` of one activated runner."""
    runner = build(find_spec(kernels=kernels), BuildRequest(model))
    runner.activate()
    return runner.run_signature  # type: ignore[attr-defined]


def steps_report(data: bytes, label: str, steps: int, **options: Any) -> StepsReport:
    """Run prefill + ``steps`` decode steps on the CPU and each other runner, compare per step:
    the pipeline's stages on a :class:`StepsSubject` of the model's bytes (``options``: its
    keyword arguments)."""
    return run_stages(StepsSubject(data, label, steps, **options))


class StepsSubject:
    """A KV-cache program as ``validate``'s subject (``--steps N``): one prompt, prefill + N
    decode steps on the CPU and every other runner, compared step by step.

    ``prompt``: its token ids (e.g. the ones a LiteRT-LM bundle's engine ran); by default a
    seeded one, as long as the prefill signature takes when ``steps`` then fit in the cache,
    shorter otherwise (padded into the prefill: :func:`with_prompt`). With ``localize``: on the
    first parting step of ``localize_runner`` (default: the first of :data:`LOCALIZABLE` that
    parts), every op of the decode signature run alone on that runner with the feeds that step
    was given (:func:`localize_step`)."""

    kind = "steps"

    def __init__(
        self,
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
        prompt: Sequence[int] | None = None,
    ) -> None:
        self.data, self.label, self.steps, self.runners = data, label, steps, tuple(runners)
        self.seed, self.timeout, self.prompt = seed, timeout, prompt
        self.say = progress or quiet
        self.localizing, self.localize_runner = localize, localize_runner
        self.runs: dict[str, dict[str, Any]] = {}
        self.cpu_tokens: list[int] = []
        self._keep: tempfile.TemporaryDirectory[str] | None = None

    @classmethod
    def from_path(cls, model_path: str | os.PathLike[str], options: Any) -> StepsSubject:
        """``validate --steps``: a :class:`ValidateOptions`' steps, runners (default: cpu,
        cpu-ref, cpu-fp16, gpu-fp16, gpu-fp32), seed, timeout, progress, localize and localize
        runner (``--localize``, ``--localize-on``)."""
        from tflkit import ir

        if options.repro is not None:
            raise UsageError("--repro works with the ordinary validate, not with --steps yet")
        data, label = ir.serde.read_model_bytes(model_path)
        return cls(
            data, label, int(options.steps), runners=tuple(options.runners) or RUNNERS,
            seed=options.seed, timeout=options.timeout, progress=options.progress,
            localize=bool(options.localize), localize_runner=options.localize_runner,
        )  # fmt: skip

    def prepare(self) -> None:
        """The prefill/decode program, the runners asked for checked, the prompt's tokens."""
        from tflkit import ir

        self.model = ir.load(self.data)
        length = None if self.prompt is None else len(self.prompt)
        self.program = with_prompt(kv_program(self.model), self.steps, length)
        _check_request(self.program, self.runners, self.localize_runner)
        self.tokens = (
            prompt_tokens(self.program, self.seed)
            if self.prompt is None
            else _own_prompt(self.program, self.prompt)
        )

    def measure(self) -> None:
        """The CPU's steps (the reference; its greedy tokens fed to every other runner), then
        each other runner's, compared step by step."""
        cpu_spec = find_spec(kernels="xnnpack")
        steps, program = self.steps, self.program
        self.say(f"{cpu_spec.name}: prefill + {steps} decode steps")
        request = BuildRequest(self.data, steps=StepPlan(program, steps))
        cpu = execute(build(cpu_spec, request), [prompt_feed(self.tokens)])
        if cpu.status != "ok":
            self.runs[cpu_spec.name] = compare_steps(cpu, cpu, 0.0)
            return
        self.cpu_tokens = tokens_of(cpu)
        feed = prompt_feed(self.tokens, self.cpu_tokens)
        if self.localizing:
            self._keep = tempfile.TemporaryDirectory(prefix="tflkit-feeds-")
        for name in self.runners:
            spec = runner_spec(name)
            assert spec is not None
            if spec == cpu_spec:
                continue
            where = "op by op on the CPU" if spec.emulated else "child process"
            self.say(f"{name}: prefill + {steps} decode steps ({where})")
            keep = None
            if self._keep is not None and name in LOCALIZABLE:
                keep = Path(self._keep.name) / name
            request = BuildRequest(
                self.data, timeout=self.timeout, steps=StepPlan(program, steps, keep)
            )
            run = execute(build(spec, request), [feed])
            self.runs[name] = compare_steps(run, cpu, PART_FRACTION[spec.precision])
            self.runs[name]["notes"] = _notes(self.model, program, spec, run, self.runs[name])

    def judge(self) -> StepsReport:
        """The report: per runner, per step, where it parts from the CPU."""
        tokens = [int(t) for t in self.tokens]
        return StepsReport(self.label, self.program, tokens, self.steps, self.cpu_tokens, self.runs)

    def wants_localization(self, report: StepsReport) -> bool:
        """``--localize``, once the CPU ran (its feeds are what the steps replay)."""
        return self._keep is not None

    def localize(self, report: StepsReport) -> None:
        """The parting step's decode call replayed op by op on its runner."""
        assert self._keep is not None
        with self._keep as kept:
            report.localization = localize_parting(
                self.data, self.program, self.runs, Path(kept), self.localize_runner,
                self.timeout, self.say,
            )  # fmt: skip


def _own_prompt(program: KvProgram, prompt: Sequence[int]) -> np.ndarray:
    """``prompt`` as the runners' int32 tokens; a usage error for an id outside the vocabulary."""
    tokens = np.asarray(prompt, np.int32)
    bad = [int(t) for t in tokens if not 0 <= t < program.vocab]
    if bad:
        raise UsageError(
            f"prompt token {bad[0]} is outside the vocabulary (0..{program.vocab - 1})"
        )
    return tokens


def _check_request(program: KvProgram, runners: Sequence[str], localize_runner: str | None) -> None:
    unknown = [r for r in runners if r not in RUNNERS]
    if unknown:
        raise UsageError(f"--steps runs {', '.join(RUNNERS)}, not {unknown}")
    if localize_runner is not None and localize_runner not in LOCALIZABLE:
        raise UsageError(
            f"--localize-on with --steps works on {', '.join(LOCALIZABLE)}, not {localize_runner}"
        )
    if localize_runner is not None and localize_runner not in runners:
        raise UsageError(f"--localize-on {localize_runner}: add it to the runners (-r)")


def _notes(
    model: Any, program: KvProgram, spec: RunnerSpec, run: RunResult, result: dict[str, Any]
) -> list[str]:
    """The terminal notes of one runner: overflowing ops (fp16 emulation), composites at a
    compile crash, the adapter, what the accelerator left to the CPU."""
    notes: list[str] = []
    part = result["first_part"]
    if spec.emulated and part is not None:
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
