"""What ``validate`` is asked to do (:class:`ValidateOptions`) and how it reports progress."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tflkit import ir
from tflkit.delegates.base import Runner
from tflkit.report.progress import Progress
from tflkit.validation.inputs import InputSets, make_input_sets

__all__ = ["InputSetOptions", "Progress", "ValidateOptions", "say"]


@dataclass
class InputSetOptions:
    """Which input sets a model runs on: the user's file or image folder (``inputs``), else
    ``num_inputs`` sets of ``input_kind`` data ("realistic": photographs, audio, valid indices,
    random where nothing fits; or "random") drawn with ``seed``; at ``input_shapes``, for
    ``signature`` (None: the first)."""

    inputs: Path | None = None
    num_inputs: int = 4
    seed: int = 0
    input_kind: str = "realistic"
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    signature: str | None = None

    def input_options(self) -> dict[str, Any]:
        """These fields alone, to build another options object that runs the same inputs."""
        return {f.name: getattr(self, f.name) for f in fields(InputSetOptions)}

    def make_sets(
        self, model: ir.Model, *, fallback_ranges: Mapping[str, tuple[float, float]] | None = None
    ) -> InputSets:
        """The input sets these options ask for (``make_input_sets``)."""
        return make_input_sets(
            model,
            signature=self.signature,
            source=self.inputs,
            count=self.num_inputs,
            seed=self.seed,
            shapes=self.input_shapes,
            kind=self.input_kind,
            fallback_ranges=fallback_ranges,
        )


@dataclass
class ValidateOptions(InputSetOptions):
    """What to run and compare. Empty ``runners``/``pairs`` mean the defaults.

    ``input_kind``: "realistic" (photographs, audio, valid indices; random where nothing fits)
    or "random". ``calibrate``: scale verdicts by the model's measured noise (else the fixed
    tolerances). ``reference``: a Keras file, SavedModel, reference file (.npz) or another
    ``.tflite`` (the model this one replaces). ``progress`` is called with a line before each
    slow step.
    """

    runners: Sequence[str] = ()
    pairs: Sequence[tuple[str, str]] = ()
    reference: Path | None = None
    save_reference: Path | None = None
    delegate: Path | None = None
    delegate_options: Mapping[str, str] = field(default_factory=dict)
    tolerances: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    localize: bool = False
    localize_runner: str | None = None
    timeout: float = 300.0
    calibrate: bool = True
    #: the WebGPU adapter of the browser runners (webgpu-fp16, webgpu-fp32, wasm):
    #: "swiftshader" (core WebGPU) or "lavapipe" (Mesa, compatibility mode)
    browser_adapter: str = "swiftshader"
    progress: Progress | None = None
    #: runners built elsewhere (on devices: :mod:`tflkit.harness.device_validate`), run after
    #: the named ones and compared like them
    extra_runners: Sequence[Runner] = ()
    #: with ``localize``: write the smallest model that still shows the divergence here
    #: (:mod:`tflkit.validation.repro`), and the command line to name in its README
    repro: Path | None = None
    repro_command: str = "tflkit validate"
    #: channel groups by output name (``--output-groups``, :mod:`tflkit.compare.groups`): judged
    #: apart at their own scale instead of the groups detected from the values; () for none
    output_groups: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    #: a KV-cache LLM graph: prefill, then this many decode steps with the cache fed back
    #: (:mod:`tflkit.validation.steps`); None runs the model once per input set
    steps: int | None = None
    #: bytes validate may use (``--memory-budget``); None: a share of the available memory
    #: (:mod:`tflkit.validation.budget`)
    memory_budget: int | None = None
    #: a ``.litertlm`` bundle: the prompts its engine generates from (None: tflkit's own)
    prompts: Sequence[str] | None = None


def say(options: ValidateOptions, line: str) -> None:
    if options.progress is not None:
        options.progress(line)
