"""The runner registry (``tflkit.delegates.base.RUNNER_SPECS``) is the one source of what a runner
is: every runner the CLI, ``--steps`` and the device harnesses accept has a spec; tolerances,
localization, the repro and the harnesses read its precision class and aliases from it; a runner
built from its spec carries its name; a feed that does not fit a runner's inputs is one clear
error before anything runs. Real LiteRT on the CPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.cli import run_tflkit
from tflkit import ir
from tflkit.compare.comparator import default_pairs
from tflkit.compare.tolerances import DEFAULTS, NOISE_FACTOR, parse_overrides, tolerance_for
from tflkit.delegates.base import (
    RECORD_DEFAULT,
    RUNNER_SPECS,
    VALIDATE_DEFAULT,
    BuildRequest,
    FeedMismatch,
    Runner,
    RunnerId,
    RunnerPair,
    StepPlan,
    execute,
    find_spec,
    parse_pair,
    parse_runner,
    precision_of,
    runner_id,
    runner_spec,
)
from tflkit.delegates.device_protocol import (
    BACKENDS,
    BROWSER_BACKENDS,
    RECORD_BACKENDS,
    WEBGPU_BACKENDS,
    JobOptions,
)
from tflkit.delegates.registry import build, builds_here
from tflkit.delegates.step_runner import StepRunner
from tflkit.errors import UsageError
from tflkit.harness.device_runs import RUNNER_OF
from tflkit.validation import repro, runners, steps

EXAMPLE = Path(__file__).resolve().parents[1] / "tflkit" / "examples" / "tiny_classifier.tflite"


def test_every_runner_the_cli_accepts_has_a_spec() -> None:
    names = [s.name for s in RUNNER_SPECS]
    assert len(names) == len(set(names))
    accepted = {*runners.RUNNERS, *runners.DEFAULT_RUNNERS, *steps.RUNNERS, *RECORD_DEFAULT}
    assert {*VALIDATE_DEFAULT, *accepted} <= set(names)
    # validate's help names every runner it accepts, and nothing the registry lacks
    text = " ".join(run_tflkit("validate", "--help").stdout.split())
    for name in runners.RUNNERS:
        assert name in text, name
    # every backend of the device protocol is a runner of the registry, under its alias
    for backend in (*BACKENDS, *BROWSER_BACKENDS):
        spec = runner_spec(RUNNER_OF[backend])
        assert spec is not None and spec.harness == backend
    # and every harness name of the registry is one of the protocol's words, which it reads
    # from the protocol (the browser runtime, a runner's child, does not read the registry)
    # in the registry's order, the browser ones fp32 first then Wasm, a job's default the record's
    harness = [s for s in RUNNER_SPECS if s.harness]
    assert tuple(s.harness for s in harness if s.device != "browser") == BACKENDS
    browser = [s for s in harness if s.device == "browser"]
    browser.sort(key=lambda s: (s.baseline is None, s.precision != "fp32"))
    assert tuple(s.harness for s in browser) == BROWSER_BACKENDS
    assert tuple(s.harness for s in browser if s.id.backend == "webgpu") == WEBGPU_BACKENDS
    record = [runner_spec(name) for name in RECORD_DEFAULT]
    assert RECORD_BACKENDS == JobOptions().backends == tuple(s.harness for s in record if s)


@pytest.mark.parametrize("spec", RUNNER_SPECS, ids=lambda s: s.name)
def test_tolerances_come_from_the_spec_precision_class(spec) -> None:
    cpu = find_spec(kernels="xnnpack").name
    for name in (spec.name, f"{spec.name}@adb:R58M123"):
        assert precision_of(name) == spec.precision
        tolerance = tolerance_for(name, cpu)
        assert tolerance.precision == spec.precision
        assert tolerance.rtol == DEFAULTS[spec.precision].rtol
        assert tolerance.noise_factor == NOISE_FACTOR[spec.precision]
    # a quantized model: every pair but the two CPU kernel sets is held to the 8-bit contract
    kernels = {s.name for s in RUNNER_SPECS if s.integer_kernels}
    expected = "fp32" if spec.name in kernels - {cpu} else "int8"
    assert tolerance_for(spec.name, cpu, quantized=True).precision == expected


def test_repro_localization_and_steps_read_the_spec() -> None:
    for spec in RUNNER_SPECS:
        want = spec.precision if spec.localize else None
        assert repro._precision(spec.name) == want
    # --steps localizes the GPU runners, fp32 first; the part fraction is the precision's
    gpu = [s for s in RUNNER_SPECS if s.device == "gpu" and s.steps]
    assert sorted(steps.LOCALIZABLE) == sorted(s.name for s in gpu)
    assert precision_of(steps.LOCALIZABLE[0]) == "fp32"
    # the default pairs hold every other runner to the CPU, the reference kernels not to the
    # framework reference
    reference = find_spec(device="framework").name
    pairs = default_pairs(["cpu", "cpu-ref", "gpu-fp16", reference])
    assert ("cpu-ref", reference) not in pairs and ("gpu-fp16", reference) in pairs
    with pytest.raises(ValueError, match="does not run a program step by step"):
        build(
            find_spec(device="browser", precision="fp16"),
            BuildRequest(b"", steps=StepPlan(None, 1)),
        )


def _example_entry() -> tuple[bytes, runners.Entry]:
    data = EXAMPLE.read_bytes()
    return data, runners.resolve_entry(ir.load(data), None)


@pytest.mark.parametrize("spec", [s for s in RUNNER_SPECS if s.device == "cpu"], ids=str)
def test_a_runner_built_from_its_spec_runs_under_its_name(spec) -> None:
    data, entry = _example_entry()
    runner = build(spec, BuildRequest(data))
    assert builds_here(spec) and isinstance(runner, Runner) and runner.name == spec.name
    feed = {
        n: np.random.default_rng(0).random((1, 32, 32, 3), dtype=np.float32) for n in entry.inputs
    }
    result = execute(runner, [feed], runners.input_meta(entry))
    assert result.ok and result.runner == spec.name, result.error
    assert set(result.outputs[0]) == set(entry.outputs)


def test_step_runners_are_runners_of_the_one_protocol() -> None:
    spec = find_spec(kernels="reference")
    runner = build(spec, BuildRequest(b"", steps=StepPlan(None, 1)))
    assert isinstance(runner, StepRunner) and isinstance(runner, Runner)
    assert runner.name == spec.name


@pytest.mark.parametrize(
    ("feed", "message"),
    [
        (
            {"image": np.zeros((1, 32, 32, 3), np.float64)},
            "takes float32 [1, 32, 32, 3], got float64",
        ),
        ({"image": np.zeros((1, 32, 32), np.float32)}, "got float32 [1, 32, 32]"),
        (
            {"picture": np.zeros((1, 32, 32, 3), np.float32)},
            "missing ['image']; unknown ['picture']",
        ),
    ],
)
def test_a_feed_that_does_not_fit_is_one_clear_error_before_running(feed, message) -> None:
    _, entry = _example_entry()
    ran = []

    class Counting:
        name = "cpu"

        def activate(self) -> None:
            ran.append("activate")

        def infer(self, feeds):  # pragma: no cover - must not run
            ran.append("infer")

        def deactivate(self) -> None:
            ran.append("deactivate")

    with pytest.raises(FeedMismatch) as info:
        execute(Counting(), [feed], runners.input_meta(entry))
    assert message in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith("cpu: input set 0")
    assert not ran  # nothing started


@pytest.mark.parametrize("spec", RUNNER_SPECS, ids=lambda s: s.name)
def test_a_runner_name_is_read_once_into_its_identity(spec) -> None:
    """A name parses to the spec's identity, on this machine or on a device (whose spec may hold
    ``@`` and ``:``), and formats back to the same text."""
    assert parse_runner(spec.name) == spec.id and spec.id.here
    for device in ("adb:R58M123", "ssh:pi@board", "browser:lavapipe"):
        on = runner_id(f"{spec.name}@{device}")
        assert on == spec.id.on(device) and on.device == device and not on.here
        assert on.name == f"{spec.name}@{device}" and runner_spec(on) is spec
    # every runner of this machine is built by its spec's factory; a device's only by its harness
    assert (spec.factory is None) == (spec.device == "device")


def test_pairs_are_typed_and_their_keys_round_trip() -> None:
    gpu, cpu = find_spec(device="gpu", precision="fp16").id, find_spec(kernels="xnnpack").id
    on_device = RunnerPair(gpu.on("adb:R58M123"), cpu)
    assert parse_pair(on_device.key) == on_device
    both = RunnerPair(gpu.on("ssh:pi@board"), cpu.on("ssh:pi@board"))
    assert parse_pair(both.key) == both
    for bad in ("gpu-fp16", "gpu-fp16:nothing", "a:b:c"):
        with pytest.raises(UsageError):
            parse_pair(bad)
    with pytest.raises(UsageError, match="unknown runner"):
        parse_runner("gpu-fp64")
    assert RunnerId("gpu", "fp16").name == gpu.name


def test_a_device_runners_pair_takes_a_tolerance() -> None:
    """``--tolerance PAIR@...`` where the pair's runner ran on a device (its name holds ``@`` and
    ``:``): the override reaches that pair, and only that pair."""
    pair = RunnerPair(
        find_spec(device="gpu", precision="fp16").id.on("adb:R58M123"), RunnerId("cpu")
    )
    overrides = parse_overrides([f"{pair.key}@rtol=0.25", "fp32@atol=1"])
    assert overrides == {pair.key: {"rtol": 0.25}, "fp32": {"atol": 1.0}}
    tolerance = tolerance_for(pair.actual.name, pair.expected.name, overrides=overrides)
    assert tolerance.rtol == 0.25 and tolerance.basis == f"overridden ({pair.key})"
    here = tolerance_for(pair.actual.on(None).name, "cpu", overrides=overrides)
    assert here.rtol == DEFAULTS["fp16"].rtol
    with pytest.raises(UsageError, match="neither a pair"):
        parse_overrides(["gpu-fp16:nothing@rtol=0.1"])
