"""The kinds of subject ``validate`` takes, and which of its options each takes: an option given
for a kind it does not apply to is refused in one line (exit 2), never ignored.

A ``.tflite`` (``tflite``: runners x input sets, compared and judged by ``compare/``), its
KV-cache program step by step (``steps``: ``--steps N``, the step comparison kind) and a
``.litertlm`` bundle (``bundle``: the LiteRT-LM engine's runners, the token comparison kind, then
its prefill_decode section through ``--steps``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tflkit.errors import UsageError

__all__ = ["KINDS", "NOT_TAKEN", "refuse_inapplicable", "subject_kind"]

#: what each kind is called in a refusal
KINDS = {"tflite": "a .tflite", "steps": "--steps", "bundle": "a .litertlm bundle"}

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


def subject_kind(model: Path, steps: int | None) -> str:
    """``bundle`` for a ``.litertlm`` (by its magic bytes), else ``steps`` with ``--steps``,
    else ``tflite``."""
    from tflkit.bundle.magic import is_bundle

    if is_bundle(model):
        return "bundle"
    return "tflite" if steps is None else "steps"


def refuse_inapplicable(kind: str, given: Iterable[str]) -> None:
    """A usage error naming the first of the ``given`` options (as spelled on the command line)
    that ``kind`` does not take, and the kinds that do."""
    for option in given:
        if option in NOT_TAKEN[kind]:
            takers = [k for k in KINDS if option not in NOT_TAKEN[k]]
            raise UsageError(
                f"{option} does not apply to {KINDS[kind]} (it applies to "
                f"{' and '.join(KINDS[k] for k in takers)}); nothing ran"
            )
