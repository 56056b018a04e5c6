"""The kinds of subject ``validate`` takes, and which of its options each takes: an option given
for a kind it does not apply to is refused in one line (exit 2), never ignored.

A ``.tflite`` (``tflite``: runners x input sets, compared and judged by ``compare/``), its
KV-cache program step by step (``steps``: ``--steps N``, the step comparison kind) and a
``.litertlm`` bundle (``bundle``: the LiteRT-LM engine's runners, the token comparison kind, then
its prefill_decode section through ``--steps``).
"""

from __future__ import annotations

from collections.abc import Iterable

from tflkit.errors import UsageError

__all__ = ["NOT_TAKEN", "refuse_inapplicable"]


#: the options a ``.tflite``'s input sets, runners, comparison and report take
_TFLITE_ONLY = (
    "--pair", "--reference", "--save-reference", "--delegate", "--delegate-option", "--inputs",
    "--num-inputs", "--input-shape", "--signature", "--tolerance", "--input-kind",
    "--output-groups", "--fixed-tolerances", "--model-explorer", "--browser-adapter",
    "--memory-budget",
)  # fmt: skip
_PROMPTS = ("--prompt", "--prompts")

#: Per kind, the options of ``validate`` it does not take. ``--steps`` prompts are seeded token
#: ids (``--seed``); a bundle's runners, prompts, comparison and localization are the engine's.
#: ``--model-explorer`` places a ``.tflite``'s per-op errors on its graph; ``--html`` and ``--json``
#: apply to every kind.
NOT_TAKEN: dict[str, frozenset[str]] = {
    "tflite": frozenset(_PROMPTS),
    "steps": frozenset((*_TFLITE_ONLY, *_PROMPTS, "--repro")),
    "bundle": frozenset((*_TFLITE_ONLY, "--runner", "--seed", "--localize", "--localize-on")),
}


def refuse_inapplicable(kind: str, given: Iterable[str]) -> None:
    """A usage error naming the first of the ``given`` options (as spelled on the command line)
    that ``kind`` does not take, and the kinds that do."""
    from tflkit.validation.pipeline import KINDS

    for option in given:
        if option in NOT_TAKEN[kind]:
            takers = [k for k in KINDS if option not in NOT_TAKEN[k]]
            raise UsageError(
                f"{option} does not apply to {KINDS[kind]} (it applies to "
                f"{' and '.join(KINDS[k] for k in takers)}); nothing ran"
            )
