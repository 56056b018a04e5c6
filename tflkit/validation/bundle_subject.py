"""``validate B.litertlm``: the bundle in the LiteRT-LM engine on CPU and GPU, compared.

1. CPU: greedy continuation of each prompt and its per-token scores;
2. GPU (the engine's default activations for a text decoder: fp16): its own greedy continuation,
   and the CPU's continuation scored (``run_text_scoring``);
3. if the greedy tokens part, the CPU scores the GPU's continuation too, for the two runtimes'
   margins at the parting step (a near tie is not a fault: :mod:`tflkit.compare.tokens`);
4. while a prompt looks faulty, the GPU again (:data:`REPEATS`): a fault must come back;
5. if the GPU with fp16 activations is faulty, the GPU again with fp32 activations: whether
   that is the fix, and what it costs in decode tokens/s;
6. if the GPU is faulty (or ``--steps N``), the prefill_decode section through ``validate
   --steps`` on the engine's prompt tokens, with ``--localize`` on gpu-fp16: the step and the op.

The engine runs are the registry's ``litert-lm-*`` runners. An engine that aborts or refuses is a
finding with the engine's own line, and so is what ``inspect`` knows LiteRT-LM will refuse (a
tokenizer smaller than the logits: the GPU engine refuses a generated id only when one comes up).
Exit 1 on any finding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tflkit.bundle.describe import is_gpu_section, static_warnings
from tflkit.bundle.engine import (
    DEFAULT_PROMPTS,
    engine_spec,
    figures,
    how,
    records,
    run_engine,
    run_json,
    unreadable_prompts,
)
from tflkit.bundle.litertlm import Bundle, load_bundle
from tflkit.bundle.llm_metadata import decode_llm_metadata
from tflkit.bundle.prompts import vocabulary_prompts
from tflkit.bundle.repro import EngineFinding, EngineRepro
from tflkit.compare.tokens import (
    DECODE_TOL,
    SAME_TOL,
    SCORE_TOL,
    TIE_BAND,
    PromptComparison,
    compare_prompt,
)
from tflkit.delegates.base import RunResult, find_spec
from tflkit.jsonable import plain
from tflkit.report.progress import quiet
from tflkit.validation.subject import run_stages

__all__ = ["CPU", "GPU", "GPU32", "BundleSubject", "BundleValidation", "validate_bundle"]

#: the registry's engine runners: the CPU, the GPU with its default (fp16) and fp32 activations
CPU, GPU, GPU32 = (engine_spec(*a).name for a in (("cpu",), ("gpu",), ("gpu", "fp32")))


@dataclass
class BundleValidation:
    """Engine runs per backend, the CPU-vs-GPU comparisons, the fp32 rerun and the findings."""

    bundle: str
    prompts: list[str]
    runs: dict[str, RunResult]
    comparisons: dict[str, list[PromptComparison]]
    fp32: dict[str, Any] | None = None
    findings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    steps: Any = None  # the prefill_decode section through --steps (a StepsReport), if run
    repro: EngineRepro | None = None  # --repro's outcome, if asked
    wall_seconds: float = 0.0
    #: the kind of subject (:mod:`tflkit.validation.pipeline`)
    kind: ClassVar[str] = "bundle"

    @property
    def exit_code(self) -> int:
        """1 on an engine finding. The section's steps locate; they do not judge: on an int8
        bundle LiteRT's CPU kernels quantize activations per call (XNNPACK and the reference
        kernels part by 2e-2 of the logits' range on the corpus's healthy bundle)."""
        return 1 if self.findings else 0

    def to_json(self) -> dict[str, Any]:
        return plain(
            {
                "schema": "tflkit.validate-litertlm/1",
                "bundle": self.bundle,
                "prompts": self.prompts,
                "thresholds": {
                    "score_tol": SCORE_TOL,
                    "tie_band": TIE_BAND,
                    "decode_tol": DECODE_TOL,
                    "same_tol": SAME_TOL,
                    "repeats": REPEATS,
                    "max_repeats": MAX_REPEATS,
                },
                "runs": {name: run_json(run) for name, run in self.runs.items()},
                "comparisons": {
                    name: [c.to_json() for c in items] for name, items in self.comparisons.items()
                },
                "first_divergent_step": self.first_part(),
                "fp32": self.fp32,
                "steps": None if self.steps is None else self.steps.to_json(),
                "localized": self.localized(),
                "findings": self.findings,
                "notes": self.notes,
                "repro": None if self.repro is None else self.repro.to_json(),
                "ok": self.exit_code == 0,
            }
        )

    def localized(self) -> dict[str, Any] | None:
        """Where the section's steps put the fault: the ops the fp16 emulation saw overflow at
        its first parting step, and the op ``--localize`` names on gpu-fp16 (each with its
        output tensor's name)."""
        if self.steps is None:
            return None
        report = self.steps.to_json()
        out: dict[str, Any] = {}
        part = report["runs"].get(find_spec(emulated=True).name, {}).get("first_part")
        if part:
            out["fp16_emulation"] = {"step": part["step"], "ops": part.get("ops", [])}
        loc = report.get("localization") or {}
        if loc.get("first_divergent_op"):
            out["gpu"] = {k: loc.get(k) for k in ("runner", "step", "first_divergent_op")}
        return out

    def first_part(self) -> dict[str, Any] | None:
        """The first faulty comparison: runner, prompt, step."""
        for name, items in self.comparisons.items():
            for c in items:
                if c.fault:
                    step = c.nonfinite_from if c.first_part is None else c.first_part
                    step = c.worst_step if step is None else step
                    return {"runner": name, "prompt": c.prompt, "step": step, "verdict": c.verdict}
        return None

    def engine_finding(self) -> EngineFinding | None:
        """The first engine finding a script can show (``--repro``): a GPU run that failed,
        else the first faulty prompt (fp16 activations before fp32)."""
        for name, activation in ((GPU, None), (GPU32, "fp32")):
            run = self.runs.get(name)
            if run is not None and not run.ok:
                line = f"the engine on {name} {how(run)}: {run.error}"
                return EngineFinding("engine", self.prompts[0], activation, line)
            for c in self.comparisons.get(name, []):
                if c.fault:
                    return EngineFinding("scores", c.prompt, activation, f"{name}: {c.line()}")
        return None


def _compare(cpu: RunResult, gpu: RunResult, branch: RunResult | None) -> list[PromptComparison]:
    out = []
    other = records(branch) if branch is not None else []
    for i, (c, g) in enumerate(zip(records(cpu), records(gpu), strict=False)):
        scores = other[i]["scored"] if i < len(other) else None
        out.append(compare_prompt(c, g, scores))
    return out


#: Further GPU runs while a prompt looks faulty: a fault must come back the same in this many,
#: or (when its numbers vary) be wrong in every run up to :data:`MAX_REPEATS` further ones.
#: Glitches come and go with the machine's load (``bench/llm_bundles.py --calibrate 8 --busy``):
#: the same scores twice more do not happen by chance (glitches differ by 0.017 or more).
REPEATS = 2
#: While a faulty prompt's numbers vary: with the engine on both cores of a busy machine, 14 of
#: 48 prompt runs glitched (docs/llm.md), so six in a row wrong by chance is under 0.1 %.
MAX_REPEATS = 5


def _confirmed(
    path: Path, cpu: RunResult, prompts: list[str], activation: str | None, **kw: Any
) -> tuple[RunResult, list[PromptComparison], list[RunResult]]:
    """A GPU pass; while a prompt's verdict is not settled (:meth:`PromptComparison.settled`),
    up to :data:`MAX_REPEATS` more, each comparison keeping the further runs'
    (:attr:`PromptComparison.repeats`)."""
    gpu, comps = _gpu_pass(path, cpu, prompts, activation, **kw)
    extra: list[RunResult] = []
    while gpu.ok and len(extra) < MAX_REPEATS and not all(c.settled(REPEATS) for c in comps):
        again, later = _gpu_pass(path, cpu, prompts, activation, **kw)
        extra.append(again)
        if not again.ok:
            break
        for first, second in zip(comps, later, strict=False):
            if not first.settled(REPEATS):
                first.repeats.append(second)
    return gpu, comps, extra


def _gpu_pass(
    path: Path, cpu: RunResult, prompts: list[str], activation: str | None, **kw: Any
) -> tuple[RunResult, list[PromptComparison]]:
    score = {i: [p["text"]] for i, p in enumerate(records(cpu))}
    gpu = run_engine(path, "gpu", prompts, activation=activation, score=score, **kw)
    if not gpu.ok:
        return gpu, []
    comparisons = _compare(cpu, gpu, None)
    parted = {
        i: [records(gpu)[i]["text"]] for i, c in enumerate(comparisons) if c.first_part is not None
    }
    if parted:
        branch = run_engine(path, "cpu", prompts, score=parted, **kw)
        if branch.ok:
            comparisons = _compare(cpu, gpu, branch)
    return gpu, comparisons


def _fp32_summary(fp16: RunResult, fp32: RunResult, comps: list[PromptComparison]) -> dict:
    faults = [c for c in comps if c.fault]
    fixes = fp32.ok and bool(comps) and not faults
    t16 = figures(fp16).get("last_decode_tokens_per_second")
    t32 = figures(fp32).get("last_decode_tokens_per_second")
    cost = None if not (t16 and t32) else 1 - t32 / t16
    finite = fp32.ok and not any(c.verdict == "non-finite" for c in comps)
    if not fp32.ok:
        summary = f"{how(fp32)}: {fp32.error}"
    elif fixes:
        summary = "the fix: the GPU with fp32 activations agrees with the CPU on every prompt"
    elif finite:
        summary = (
            "no non-finite score any more, but the GPU with fp32 activations still parts from "
            f"the CPU: {faults[0].line()}"
        )
    else:
        summary = "not the fix: non-finite scores with fp32 activations too"
    if cost is not None and fp32.ok:
        change = f"{cost:.0%} slower" if cost >= 0 else f"{-cost:.0%} faster"
        summary += f" (decode {t32:.4g} tok/s against {t16:.4g} with fp16: {change})"
    return {"fixes": fixes, "finite": finite, "decode_tps_fp16": t16, "decode_tps_fp32": t32,
            "cost": cost, "summary": summary}  # fmt: skip


def _findings(v: BundleValidation) -> list[str]:
    out = []
    for name, run in v.runs.items():
        if not run.ok:
            out.append(f"the engine on {name} {how(run)}: {run.error}")
    items = v.comparisons.get(GPU, [])
    out += [f"{GPU}: {c.line()}" for c in items if c.fault]
    return out


def _unstable_notes(v: BundleValidation) -> list[str]:
    """One note per prompt whose GPU numbers were wrong in a run and right in a later one."""
    return [
        f"{name}: {c.line()}. Not a finding: the same prompt came out right in a later run. "
        "The engine's GPU path gives different numbers from run to run here (a race in the "
        "engine or the driver; on the software GPU it showed with the engine on several cores "
        "of a busy machine, and tflkit runs it on one there)"
        for name, items in v.comparisons.items()
        for c in items
        if c.unstable
    ]


#: Decode steps of the section run when the engine's GPU was found faulty and --steps not given.
LOCALIZE_STEPS = 4


def section_steps(
    bundle: Bundle,
    steps: int,
    timeout: float,
    say: Callable[[str], None],
    prompt: list[int] | None = None,
) -> Any:
    """The ``prefill_decode`` section through ``validate --steps`` on ``prompt``'s token ids
    (the ones the engine ran; padded into the prefill signature when shorter): CPU, the fp16
    emulation, GPU fp16 and fp32; the step where each parts, the op named by ``--localize`` on
    gpu-fp16 (the engine's default activations); its ``odml.*`` composites inlined first (rule
    ``inline_composite``, proven bit-exact on the CPU): LiteRT's GPU accelerator, which the
    steps run on, crashes compiling them where the engine's own GPU graph builder does not."""
    from tflkit.rewriter.run import rewrite_model
    from tflkit.validation.steps import RUNNERS, steps_report

    section = next(s for s in bundle.of_kind("TFLiteModel") if s.model_type == "prefill_decode")
    data = bytes(bundle.view(section))
    say(f"{section.label}: inlining its composites for LiteRT's GPU accelerator")
    outcome = rewrite_model(data, rule_names=["inline_composite"], label=section.label)
    if outcome.passes.fired and outcome.verification is not None and outcome.verification.ok:
        data = outcome.rewritten
    say(f"{section.label}: prefill + {steps} decode steps on {', '.join(RUNNERS)}")
    return steps_report(
        data,
        f"{bundle.label} {section.label}",
        steps,
        timeout=timeout,
        localize=True,
        localize_runner=find_spec(device="gpu", precision="fp16").name,
        prompt=prompt,
    )


def engine_prompt(bundle: Bundle, v: BundleValidation) -> list[int] | None:
    """The token ids the engine prefilled for the first faulty prompt (else the first): the
    bundle's start token, then the prompt's own ids (the engine's prefill counts them so)."""
    cpu = records(v.runs[CPU])
    if not cpu:
        return None
    first = v.first_part()
    record = next((r for r in cpu if first and r["prompt"] == first["prompt"]), cpu[0])
    found = bundle.of_kind("LlmMetadataProto")
    start = decode_llm_metadata(bundle.view(found[0])).get("start_token", {}) if found else {}
    return [*start.get("ids", []), *record["prompt_ids"]]


def _gpu_passes(
    v: BundleValidation,
    path: Path,
    cpu: RunResult,
    texts: list[str],
    kw: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    """The GPU against the CPU (repeated while faulty), then fp32 activations when faulty."""
    say("engine on the GPU (fp16 activations, the engine's default)")
    gpu, comps, extra = _confirmed(path, cpu, texts, None, **kw) if cpu.ok else (
        run_engine(path, "gpu", texts, **kw), [], []
    )  # fmt: skip
    v.runs[GPU], v.comparisons[GPU] = gpu, comps
    for i, again in enumerate(extra, 2):
        v.runs[f"{GPU} (run {i})"] = again
    if cpu.ok and gpu.ok and any(c.fault for c in comps):
        say("engine on the GPU with fp32 activations")
        fp32, comps32, _ = _confirmed(path, cpu, texts, "fp32", **kw)
        v.runs[GPU32], v.comparisons[GPU32] = fp32, comps32
        v.fp32 = _fp32_summary(gpu, fp32, comps32)


def validate_bundle(
    path: str | Path,
    prompts: Sequence[str] | None = None,
    *,
    max_output_tokens: int = 16,
    steps: int | None = None,
    timeout: float = 900,
    progress: Callable[[str], None] | None = None,
) -> BundleValidation:
    """The engine's CPU run against its GPU run on ``prompts`` (tflkit's own by default); then,
    with ``steps`` or when the engine's GPU was found faulty, the prefill_decode section
    through :func:`section_steps` (the pipeline's stages on a :class:`BundleSubject`)."""
    subject = BundleSubject(
        Path(path), prompts, max_output_tokens=max_output_tokens, steps=steps, timeout=timeout,
        progress=progress,
    )  # fmt: skip
    return run_stages(subject)


class BundleSubject:
    """A ``.litertlm`` bundle as ``validate``'s subject: the LiteRT-LM engine's runners on its
    prompts, compared token by token (:mod:`tflkit.compare.tokens`)."""

    kind = "bundle"

    def __init__(
        self,
        path: Path,
        prompts: Sequence[str] | None = None,
        *,
        max_output_tokens: int = 16,
        steps: int | None = None,
        timeout: float = 900,
        progress: Callable[[str], None] | None = None,
        repro: Path | None = None,
        repro_command: str = "tflkit validate",
    ) -> None:
        self.path, self.steps, self.repro, self.repro_command = path, steps, repro, repro_command
        self.texts = list(prompts or DEFAULT_PROMPTS)
        self.given = bool(prompts)
        self.kw = {"max_output_tokens": max_output_tokens, "timeout": timeout}
        self.timeout = timeout
        self.say = progress or quiet

    @classmethod
    def from_options(cls, path: Path, options: Any) -> BundleSubject:
        """``validate B.litertlm``: a :class:`ValidateOptions`' prompts, steps, timeout,
        progress and repro."""
        return cls(
            path, options.prompts, steps=options.steps, timeout=options.timeout,
            progress=options.progress, repro=options.repro, repro_command=options.repro_command,
        )  # fmt: skip

    def prepare(self) -> None:
        """The bundle read (a clear error for a file that is not one)."""
        self.bundle = load_bundle(self.path)

    def measure(self) -> None:
        """The engine on the CPU, then on the GPU against it (repeated while a prompt looks
        faulty; fp32 activations when faulty), unless the bundle is constrained off the GPU."""
        self.say("engine on the CPU")
        cpu = run_engine(self.path, "cpu", self.texts, **self.kw)
        notes = []
        if not self.given and cpu.ok and len(unreadable_prompts(cpu)) == len(self.texts):
            cpu, notes = self._own_words(cpu)
        v = BundleValidation(self.bundle.label, self.texts, {CPU: cpu}, {}, notes=notes)
        decoder = [
            s for s in self.bundle.of_kind("TFLiteModel") if s.model_type == "prefill_decode"
        ]
        if decoder and not is_gpu_section(decoder[0]):
            v.notes.append(
                f"{decoder[0].label} has backend_constraint {decoder[0].backend_constraint}: "
                "LiteRT-LM runs it on those backends only (its GPU engine refuses a bundle so "
                "constrained), so there is no GPU run to compare"
            )
        else:
            _gpu_passes(v, self.path, cpu, self.texts, self.kw, self.say)
        self.validation = v

    def _own_words(self, cpu: RunResult) -> tuple[RunResult, list[str]]:
        """tflkit's prompts read back as unknown tokens: the CPU again on prompts of the
        tokenizer's own words (:func:`tflkit.bundle.prompts.vocabulary_prompts`), and the note
        that says so; the first run and no note when the tokenizer gives no words."""
        own = vocabulary_prompts(self.bundle)
        if not own:
            return cpu, []
        first = records(cpu)[0]
        note = (
            f"tflkit's prompts are not text this bundle's tokenizer knows ({first['prompt']!r} "
            f"reads back as {first['prompt_back']!r}): validate ran prompts made of the "
            f"tokenizer's own words instead: {', '.join(map(repr, own))}; give --prompt in its "
            "language for text it was trained on"
        )
        self.say("engine on the CPU, on prompts of the tokenizer's own words")
        self.texts = own
        return run_engine(self.path, "cpu", own, **self.kw), [note]

    def judge(self) -> BundleValidation:
        """The findings: unreadable prompts, engine failures, faulty prompts, static warnings."""
        v = self.validation
        v.notes += _unstable_notes(v)
        static = static_warnings(self.bundle)
        v.findings = (
            unreadable_prompts(v.runs[CPU])
            + _findings(v)
            + [f"section {i}: {w}" for i, found in static.items() for w in found]
        )
        return v

    def _section_wanted(self, v: BundleValidation) -> bool:
        has_section = any(
            s.model_type == "prefill_decode" for s in self.bundle.of_kind("TFLiteModel")
        )
        faulty = any(c.fault for c in v.comparisons.get(GPU, []))
        return has_section and (self.steps is not None or faulty)

    def wants_localization(self, report: BundleValidation) -> bool:
        """``--steps``, ``--repro``, or a faulty GPU: the section's steps name the op."""
        return self._section_wanted(report) or self.repro is not None

    def localize(self, report: BundleValidation) -> None:
        """The prefill_decode section through ``--steps`` on the engine's prompt tokens; with
        ``--repro``, a script of LiteRT-LM alone showing the engine's finding."""
        if self._section_wanted(report):
            prompt = engine_prompt(self.bundle, report)
            steps = self.steps or LOCALIZE_STEPS
            report.steps = section_steps(self.bundle, steps, self.timeout, self.say, prompt)
        if self.repro is not None:
            from tflkit.bundle.repro import write_engine_repro
            from tflkit.delegates.litert_lm import pinned_by_default

            self.say("writing the engine repro")
            report.repro = write_engine_repro(
                report.engine_finding(),
                self.path,
                self.repro,
                command=self.repro_command,
                one_cpu=pinned_by_default("gpu"),
                timeout=self.timeout,
            )
