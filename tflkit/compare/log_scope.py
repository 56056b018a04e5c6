"""Which pairs the log-domain rule judges: those whose two sides share the CPU's arithmetic.

The rule (``comparator._check_log_probabilities``) holds float probabilities of an fp32 pair to
their own log noise, so a saturated softmax cannot hide a change of the logits: a rewritten copy
whose perturbed bias moves its probabilities by under 1e-6 and its logits by nats
(``tests/test_validate_faults.py``). That noise is measured on the CPU (inputs perturbed by one
ulp, XNNPACK against the reference kernels), so it is the whole story only where both sides
compute as the CPU does: a model against its rewritten copy, a framework reference, the other
CPU kernels. A GPU (a browser's WebGPU, a phone) evaluates exp and sigmoid and orders its sums
its own way; where a probability is ~0 its logarithm then moves far more than the CPU's noise
while the value moves by nothing anyone reads: two healthy person-segmentation models whose
sigmoid masks peak at 9.5e-7 differed from the CPU by 1.2e-11 and by 0.346 in the log domain,
43 times their CPU log noise. Between devices the values are judged (the value bound, argmax
flips, thresholds), not their logarithms: measured on the sigmoid/softmax family of
``bench/false_alarms.py --families-only``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from tflkit.compare.sensitivity import OutputNoise
from tflkit.delegates.base import device_of, runner_spec

__all__ = ["CPU_ARITHMETIC", "judged_in_log_domain", "without_log_noise"]

#: the runner devices that compute as the CPU does (the framework reference runs on the CPU)
CPU_ARITHMETIC = ("cpu", "framework")


def _cpu_arithmetic(name: str) -> bool:
    spec = runner_spec(name)
    return spec is not None and spec.device in CPU_ARITHMETIC and device_of(name) is None


def judged_in_log_domain(actual: str, expected: str) -> bool:
    """Whether the pair's probabilities are also judged in the log domain."""
    return _cpu_arithmetic(actual) and _cpu_arithmetic(expected)


def without_log_noise(
    noise: Mapping[str, Mapping[str, OutputNoise]] | None,
) -> dict[str, dict[str, OutputNoise]] | None:
    """``noise`` with no log-domain figure (the rule then leaves the pair's values alone)."""
    if noise is None:
        return None
    return {
        precision: {name: replace(one, log_max_abs=None) for name, one in per.items()}
        for precision, per in noise.items()
    }
