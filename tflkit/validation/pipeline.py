"""``validate``'s one pipeline, for every kind of subject.

A subject is what ``validate`` is given: a ``.tflite`` (:mod:`tflkit.validation.tflite_subject`),
its KV-cache program step by step (``--steps N``: :mod:`tflkit.validation.steps`) or a
``.litertlm`` bundle (:mod:`tflkit.validation.bundle_subject`). Each goes through the same stages,
in this order, run by :func:`validate`:

1. ``prepare``: the subject read and refused early when it cannot run (memory, shapes, a prompt
   outside the vocabulary), its input sets made (images, audio and ids for a ``.tflite``; seeded
   or given token ids for ``--steps``; text prompts for a bundle) and its runners named;
2. ``measure``: the runners run on the input sets and compared by :mod:`tflkit.compare` (pairs of
   outputs against the model's own noise; steps of logits; tokens and their scores). A
   comparison may ask for more runs: a bundle's GPU again while a prompt looks faulty;
3. ``judge``: the verdicts, as the subject's report (findings, notes, exit code);
4. ``localize``, when asked (``--localize``, ``--repro``) or, for a bundle, when the engine's GPU
   was found faulty: where the runners part, and a repro.

The stages and what a report has (``exit_code``, 0: no finding; ``to_json()``) are
:mod:`tflkit.validation.subject`; :mod:`tflkit.report.validation` renders any report.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tflkit.validation.options import ValidateOptions
from tflkit.validation.subject import Report, Subject, run_stages

__all__ = [
    "KINDS",
    "Report",
    "Subject",
    "ValidateOptions",
    "open_subject",
    "subject_kind",
    "validate",
]

#: the kinds of subject, as a refusal names them
KINDS = {"tflite": "a .tflite", "steps": "--steps", "bundle": "a .litertlm bundle"}


def subject_kind(model: str | os.PathLike[str], steps: int | None) -> str:
    """``bundle`` for a ``.litertlm`` (by its magic bytes), else ``steps`` with ``--steps``,
    else ``tflite``."""
    from tflkit.bundle.magic import is_bundle

    if is_bundle(Path(model)):
        return "bundle"
    return "tflite" if steps is None else "steps"


def open_subject(model: str | os.PathLike[str], options: ValidateOptions) -> Subject:
    """The subject ``model`` is, with ``options``: nothing has run yet."""
    kind = subject_kind(model, options.steps)
    if kind == "bundle":
        from tflkit.validation.bundle_subject import BundleSubject

        return BundleSubject.from_options(Path(model), options)
    if kind == "steps":
        from tflkit.validation.steps import StepsSubject

        return StepsSubject.from_path(model, options)
    from tflkit.validation.tflite_subject import TfliteSubject

    return TfliteSubject(model, options)


def validate(
    model: str | os.PathLike[str] | Subject, options: ValidateOptions | None = None
) -> Any:
    """Run every stage of a subject (a path, or a subject already opened) and return its report
    (a :class:`~tflkit.report.validate_report.ValidateReport`, a
    :class:`~tflkit.validation.step_compare.StepsReport` or a
    :class:`~tflkit.validation.bundle_subject.BundleValidation`); never raises for what a
    runtime does."""
    options = options or ValidateOptions()
    subject = open_subject(model, options) if isinstance(model, str | os.PathLike) else model
    return run_stages(subject)
