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

import tempfile
import time
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
from tflkit.validation.llm_program import (
    KvProgram,
    causal_mask,
    kv_program,
    prompt_tokens,
    with_prompt,
)
from tflkit.validation.step_compare import PART_FRACTION, StepsReport, compare_steps, fix_for
from tflkit.validation.step_localize import LOCALIZABLE, localize_parting, localize_step

__all__ = [
    "LOCALIZABLE",
    "RUNNERS",
    "KvProgram",
    "StepsReport",
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
    "validate_steps",
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
    prompt: Sequence[int] | None = None,
) -> StepsReport:
    """Run prefill + ``steps`` decode steps on the CPU and each other runner, compare per step.

    ``prompt``: its token ids (e.g. the ones a LiteRT-LM bundle's engine ran); by default a
    seeded one, as long as the prefill signature takes when ``steps`` then fit in the cache,
    shorter otherwise (padded into the prefill: :func:`with_prompt`). With ``localize``: on the
    first parting step of ``localize_runner`` (default: the first of
    :data:`LOCALIZABLE` that parts), every op of the decode signature run alone on that runner
    with the feeds that step was given (:func:`localize_step`)."""
    from tflkit import ir

    start = time.perf_counter()
    model = ir.load(data)
    program = with_prompt(kv_program(model), steps, None if prompt is None else len(prompt))
    _check_request(program, runners, localize_runner)
    prompt = prompt_tokens(program, seed) if prompt is None else _own_prompt(program, prompt)
    cpu_spec = find_spec(kernels="xnnpack")
    if progress:
        progress(f"{cpu_spec.name}: prefill + {steps} decode steps")
    plan = StepPlan(program, steps)
    cpu = execute(build(cpu_spec, BuildRequest(data, steps=plan)), [prompt_feed(prompt)])
    runs: dict[str, dict[str, Any]] = {}
    report = StepsReport(label, program, [int(t) for t in prompt], steps, [], runs, 0.0)
    if cpu.status != "ok":
        runs[cpu_spec.name] = compare_steps(cpu, cpu, 0.0)
        report.seconds = time.perf_counter() - start
        return report
    report.cpu_tokens = tokens_of(cpu)
    feed = prompt_feed(prompt, report.cpu_tokens)
    with tempfile.TemporaryDirectory(prefix="tflkit-feeds-") as tmp:
        for name in runners:
            spec = runner_spec(name)
            assert spec is not None
            if spec == cpu_spec:
                continue
            if progress:
                where = "op by op on the CPU" if spec.emulated else "child process"
                progress(f"{name}: prefill + {steps} decode steps ({where})")
            keep = Path(tmp) / name if localize and name in LOCALIZABLE else None
            request = BuildRequest(data, timeout=timeout, steps=StepPlan(program, steps, keep))
            runner = build(spec, request)
            run = execute(runner, [feed])
            runs[name] = compare_steps(run, cpu, PART_FRACTION[spec.precision])
            runs[name]["notes"] = _notes(model, program, spec, run, runs[name])
        if localize:
            report.localization = localize_parting(
                data, program, runs, Path(tmp), localize_runner, timeout, progress
            )
    report.seconds = time.perf_counter() - start
    return report


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
