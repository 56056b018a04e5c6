"""Pass/fail tolerances per pair of runners, with defaults grounded in measurements.

A pair passes an output when ``max_abs <= atol + rtol * peak`` (``peak = max|expected|``), the
cosine similarity is at least ``min_cosine``, and no value is finite on one side but not on the
other. The default depends on the lower precision of the two runners:

- ``fp16`` (GPU accelerator in its default precision, an external delegate of unknown precision):
  ``rtol 5e-2, atol 1e-3, min_cosine 0.999``. Measured here (``bench/default_tolerances.py``),
  GPU fp16 vs CPU XNNPACK on the software GPU, 4 random inputs each (worst ``max_abs / peak``
  of the outputs; lowest cosine): deeplabv3 1.0e-2 (0.999986), openWakeWord's embedding model
  5.3e-3 (0.999994), MLTK's float keyword spotters pacman_v3 4.9e-4 and on_off_v3 7.9e-4,
  BirdNET's FP16 metadata model (part on the CPU) 4.9e-2 (0.999975). The default passes all of
  them: ~5x margin on the first four, ~1.0x on BirdNET's, whose fp16 error is a real fp16
  finding (the fp16 emulation shows it too, docs/validate-corpus.md).
- ``fp32`` (CPU XNNPACK, CPU reference kernels, GPU with ``enforce_f32``, TensorFlow):
  ``rtol 1e-4, atol 1e-6, min_cosine 0.99999``. Measured on the same models: GPU fp32 vs CPU
  at most 2.3e-6 of the peak (deeplabv3), CPU reference kernels vs XNNPACK at most 2.3e-6
  (deeplabv3), so ~40x margin; lowest cosine 1.0 to six places.
- integer and bool outputs are compared exactly; quantized outputs are dequantized first and get
  one quantization step of slack (a rounding flip) and no cosine bound (one step on a few
  values moves the cosine more than any fp32 bound allows).

These fixed bounds are the fallback. ``validate`` scales its verdicts by what the model itself
does instead (:mod:`tflkit.compare.sensitivity`): an output passes when ``max_abs <=
noise_factor * max(noise, eps * scale)``, ``noise`` being the output's own movement at the pair's
precision and ``noise_factor`` the :data:`NOISE_FACTOR` of that precision, measured on the real
corpus (``docs/validate.md``, ``bench/validate_corpus.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tflkit.delegates.base import pair_key, parse_pair, precision_of, runner_id, runner_spec
from tflkit.errors import UsageError
from tflkit.jsonable import plain_fields

__all__ = [
    "DEFAULTS",
    "EXACT",
    "NOISE_FACTOR",
    "Tolerance",
    "parse_overrides",
    "precision_of",
    "tolerance_for",
]


@dataclass(frozen=True)
class Tolerance:
    """Bounds one output must meet; ``basis`` says where the numbers come from."""

    rtol: float
    atol: float = 0.0
    min_cosine: float = 0.0
    basis: str = ""
    #: precision class of the pair ("fp32", "fp16", "int8"); "" for exact comparisons
    precision: str = ""
    #: multiplier of the output's measured noise (0: use the fixed rtol/atol bound)
    noise_factor: float = 0.0

    def bound(self, peak: float) -> float:
        """The largest max_abs error allowed for an output whose largest |value| is ``peak``."""
        return self.atol + self.rtol * peak

    def to_json(self) -> dict[str, Any]:
        return plain_fields(self)


DEFAULTS: dict[str, Tolerance] = {
    "fp16": Tolerance(
        rtol=5e-2,
        atol=1e-3,
        min_cosine=0.999,
        basis="default fp16: ~5x the fp16 error measured on real float models (1e-2 of peak; "
        "4.9e-2 on one with a real fp16 hazard)",
    ),
    "fp32": Tolerance(
        rtol=1e-4,
        atol=1e-6,
        min_cosine=0.99999,
        basis="default fp32: ~40x the worst fp32 error measured on real models (2.3e-6 of peak)",
    ),
}
EXACT = Tolerance(rtol=0.0, atol=0.0, min_cosine=0.0, basis="exact: integer or bool output")

#: How many times its own noise an output may move, per precision class. Measured on the real
#: corpus by ``bench/validate_corpus.py``: each sits above the largest error/noise ratio of a
#: healthy model (fp32 1.0, fp16 19.4, int8 2, int8-fp16 4.1 on 38 models): see docs/validate.md.
#: "int8-fp16": a quantized model against a half-precision runner, whose noise includes one-step
#: flips of its quantized activations with fp16's odds, more for long sums
#: (``tflkit.delegates.step_flips``): 6, 1.5x over the corpus's worst (as for fp16); 8 let the
#: bound of a softmax reach its whole range (efficientnet_lite0: 112 of 256 steps).
#: "int8-same-grid": a quantized model against a ``.tflite`` reference on the same grid, both on
#: the CPU's integer kernels: the int8 factor times one step, as nothing moves on its own; the
#: corpus's rewritten quantized models stay bit-identical to their originals (docs/validate.md).
NOISE_FACTOR = {"fp32": 16.0, "fp16": 32.0, "int8": 8.0, "int8-fp16": 6.0, "int8-same-grid": 8.0}
_KEYS = {"rtol", "atol", "min_cosine", "cosine", "noise_factor"}


def _integer_kernels(runner: str) -> bool:
    """The runner computes a quantized model on its 8-bit grid (the CPU interpreter's kernels,
    on this machine: a device's CPU is another computation)."""
    spec, rid = runner_spec(runner), runner_id(runner)
    return spec is not None and rid is not None and spec.integer_kernels and rid.here


def _is_reference(runner: str) -> bool:
    spec, rid = runner_spec(runner), runner_id(runner)
    return spec is not None and rid is not None and spec.device == "framework" and rid.here


def tolerance_for(
    actual: str,
    expected: str,
    *,
    overrides: Mapping[str, Mapping[str, float]] | None = None,
    quantized: bool = False,
    same_grid: bool = False,
) -> Tolerance:
    """The tolerance of the pair ``actual`` vs ``expected``, after user overrides.

    ``quantized``: the model is quantized, so every pair but the two CPU kernels (which both
    compute on the 8-bit grid) is held to the quantization contract (precision class "int8"):
    the GPU dequantizes and computes in float, the framework reference never quantized.
    ``same_grid``: the reference is a ``.tflite`` with the same quantized inputs and outputs, so
    a CPU runner against it compares two integer computations of the same grid on identical
    integer inputs (class "int8-same-grid": no input moves, so one step is all the slack).
    Override keys, most specific last: "all", the precision class ("fp16"/"fp32"/"int8"), the
    pair "actual:expected". Giving ``rtol`` or ``atol`` switches that pair to the fixed bound
    ``atol + rtol * peak``.
    """
    klass = "fp16" if "fp16" in (precision_of(actual), precision_of(expected)) else "fp32"
    two_kernels = actual != expected and _integer_kernels(actual) and _integer_kernels(expected)
    if quantized and not two_kernels:
        klass = "int8"  # the CPU computes on the 8-bit grid, the others in float
        if same_grid and _is_reference(expected) and _integer_kernels(actual):
            klass = "int8-same-grid"
    tolerance = replace(
        DEFAULTS["fp32" if klass.startswith("int8") else klass],
        precision=klass,
        noise_factor=NOISE_FACTOR[klass],
    )
    for key in ("all", klass, pair_key(actual, expected)):
        values = dict((overrides or {}).get(key) or {})
        if values:
            if {"rtol", "atol"} & set(values) and "noise_factor" not in values:
                values["noise_factor"] = 0.0  # an explicit bound replaces the calibrated one
            tolerance = replace(tolerance, **values, basis=f"overridden ({key})")
    return tolerance


#: ``[TARGET@]KEY=VALUE,...``: the target is everything before the last ``@`` (a device runner's
#: pair holds ``@`` itself: ``gpu-fp16@adb:SERIAL:cpu@rtol=0.05``)
_OVERRIDE = re.compile(r"(?:(?P<target>.*)@)?(?P<body>[^@]*)")


def _target(item: str, target: str) -> str:
    """An override's target as :func:`tolerance_for` looks it up: "all", a precision class or
    a pair's key; a usage error for anything else (it would be ignored)."""
    if target == "all" or target in NOISE_FACTOR:
        return target
    try:
        return parse_pair(target, "--tolerance").key
    except UsageError:
        raise UsageError(
            f"--tolerance {item!r}: {target!r} is neither a pair ACTUAL:EXPECTED of runners nor "
            f"a precision class ({', '.join(NOISE_FACTOR)}) nor all"
        ) from None


def parse_overrides(items: Sequence[str]) -> dict[str, dict[str, float]]:
    """Each ``[TARGET@]KEY=VALUE,...`` (TARGET: a pair such as ``gpu-fp16:cpu``, a precision
    class, or all, the default) -> override mapping by target."""
    overrides: dict[str, dict[str, float]] = {}
    for item in items:
        m = _OVERRIDE.fullmatch(item)
        assert m is not None  # every string matches
        target, body = _target(item, m["target"] or "all"), m["body"]
        values: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in body.split(","))):
            key, eq, raw = part.partition("=")
            key = "min_cosine" if key == "cosine" else key
            if not eq or key not in _KEYS:
                raise UsageError(
                    f"--tolerance {item!r}: expected [PAIR|fp16|fp32|int8|all@]KEY=VALUE,... "
                    "with KEY in rtol, atol, min_cosine, noise_factor"
                )
            try:
                values[key] = float(raw)
            except ValueError:
                raise UsageError(f"--tolerance {item!r}: {raw!r} is not a number") from None
        overrides.setdefault(target, {}).update(values)
    return overrides
