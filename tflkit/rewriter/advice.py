"""The check a user runs: the target's verdicts at the user's input shapes, the rewrite rule
that fixes each rejected op, and (``probe``) what the real accelerator says.

The verdicts are :mod:`tflkit.compat`'s alone; this module adds what only the rewriter knows
(which of its rules fixes an op, :class:`Advisor`) and the input shapes it fixes
(:func:`~tflkit.ir.shapes.fix_input_shapes`), so ``compat`` never imports the rewriter.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tflkit import ir
from tflkit.compat.check import TARGET_DEFAULT, check_report
from tflkit.compat.targets import DEFAULT_TARGET
from tflkit.fsio import Sha256Job, sha256_of
from tflkit.report.check_report import CheckReport, FixHint, ReasonInfo
from tflkit.report.progress import Progress, Spinner

if TYPE_CHECKING:
    from tflkit.rewriter.rule import ModelPass, Rule
    from tflkit.rewriter.ruleset import RuleSet


class Advisor:
    """Names the rule that fixes an op (``check_report``'s ``advise``), for the ops of one model.

    Default rules come before opt-in ones. A model pass answers for every op type it fixes
    with its verdict on the model (asked once per model); op rewrites answer op by op: the
    first whose pattern, reasons and match accept the op, else one that would once
    ``--input-shape`` fixes the shapes. The catalogue's rules are asked about an op type only
    when they may fix it (:func:`tflkit.rewriter.rules.fixing`: only their modules are
    imported, so a model the target takes whole never loads the rewriter).
    """

    def __init__(self, rules: RuleSet | Sequence[Rule] | None = None) -> None:
        self._given = rules
        self._by_type: dict[str, tuple[RuleSet, list[Rule]]] = {}
        self._whole: dict[str, FixHint] = {}

    def _candidates(self, op_type: str) -> tuple[RuleSet, list[Rule]]:
        """The rules that may fix an op of ``op_type``, default ones first, and their set (its
        opt-in flags): the catalogue's that fix the type, or every rule given."""
        if op_type not in self._by_type:
            from tflkit.rewriter.rules import fixing
            from tflkit.rewriter.ruleset import RuleSet

            given = self._given
            if given is None:
                found = fixing(op_type)
            else:
                found = given if isinstance(given, RuleSet) else RuleSet(given)
            self._by_type[op_type] = (found, sorted(found, key=found.is_opt_in))
        return self._by_type[op_type]

    def __call__(
        self, op: ir.Op, reasons: Sequence[ReasonInfo], dynamic: str = ""
    ) -> FixHint | None:
        from tflkit.rewriter.rule import ModelPass, OpRewrite

        ruleset, rules = self._candidates(op.type)
        whole = next((r for r in rules if isinstance(r, ModelPass) and op.type in r.fixes), None)
        if whole is not None:
            return self._whole_model(whole, ruleset, op)
        texts = [f"{r.code}: {r.message}" for r in reasons]
        after_shapes = None
        for rule in rules:
            if not isinstance(rule, OpRewrite) or not rule.pattern(op):
                continue
            if not rule.addresses(texts):
                continue
            match = rule.match(op)
            if match:
                return _hint(rule, ruleset)
            why_not = match.reason or ""
            if dynamic and after_shapes is None and "--input-shape" in why_not:
                after_shapes = FixHint(
                    rule.name, f"{dynamic}, then rule {rule.name}", "input_shape"
                )
        return after_shapes

    def _whole_model(self, rule: ModelPass, ruleset: RuleSet, op: ir.Op) -> FixHint | None:
        model = op.subgraph.model if op.subgraph is not None else None
        if model is None:
            return None
        if rule.name not in self._whole:
            match = rule.match_model(model)
            self._whole[rule.name] = (
                _hint(rule, ruleset)
                if match
                else FixHint(
                    None, f"none: the {rule.name} rewrite cannot take it ({match.reason})", "none"
                )
            )
        return self._whole[rule.name]


def _hint(rule: Rule, ruleset: RuleSet) -> FixHint:
    kind = "opt_in_rule" if ruleset.is_opt_in(rule) else "rule"
    return FixHint(rule.name, rule.summary, kind)


def check_path(
    path: str | Path,
    *,
    target: str = DEFAULT_TARGET,
    max_partitions: int | None = TARGET_DEFAULT,
    with_probe: bool = False,
    probe_timeout: float = 120.0,
    cache_dir: str | Path | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    progress: Spinner | None = None,
    native_log: Progress | None = None,
    browser: str | None = None,
    sha256: Sha256Job | None = None,
) -> tuple[CheckReport, ir.Model]:
    """Check the model at ``path``; returns the report and the loaded model.

    ``input_shapes`` (``--input-shape``, by signature or tensor name) fixes dynamic inputs
    first, so verdicts, copies and the probe are those of the model at that shape. ``progress``
    wraps the probe (e.g. a spinner: it compiles shaders for seconds); ``native_log`` gets the
    accelerator's own log (``--verbose``). ``browser`` (a WebGPU adapter of the browser harness:
    ``swiftshader`` or ``lavapipe``) also runs the model in LiteRT.js and says which ops it
    leaves to the CPU, and where that differs from the native accelerator. ``sha256``: the
    file's hash, already started (else it starts once the file is read).
    """
    data, label = ir.serde.read_model_bytes(path, mapped=True)
    digest = sha256 if sha256 is not None else Sha256Job(data)
    model = ir.load(data, label=label)
    if input_shapes:
        from tflkit.delegates.litert_cpu import computed_shapes
        from tflkit.ir.shapes import fix_input_shapes

        fix_input_shapes(model, input_shapes, infer=computed_shapes)
    advisor = Advisor()
    report = check_report(
        model, target=target, max_partitions=max_partitions, path=label, advise=advisor
    )
    report.sha256 = digest.hexdigest() or sha256_of(data)
    report.input_shapes = {k: list(v) for k, v in (input_shapes or {}).items()}
    if with_probe:  # the probe's modules (the accelerator's log parser...) only when asked
        from tflkit.compat.probe_verdicts import (
            attach_probe,
            attach_signature_probes,
            probe_each_signature,
        )
        from tflkit.gpu.probe import probe

        probed = ir.dumps(model) if input_shapes else bytes(data)
        what = f"compiling {Path(label).name} on the GPU accelerator (probe)"
        with progress(what) if progress is not None else contextlib.nullcontext():
            result = probe(probed, timeout=probe_timeout, cache_dir=cache_dir)
        if native_log is not None:
            native_log(result.log_text)
        attach_probe(report, model, result, advise=advisor)
        if len(model.signatures) > 1:
            what = f"compiling each signature of {Path(label).name} alone (probe)"
            with progress(what) if progress is not None else contextlib.nullcontext():
                found = probe_each_signature(model, timeout=probe_timeout, cache_dir=cache_dir)
            attach_signature_probes(report, found)
    if browser is not None:
        from tflkit.rewriter.browser_probe import attach_browser_probe, probe_in_browser

        probed = ir.dumps(model) if input_shapes else bytes(data)
        what = f"running {Path(label).name} in LiteRT.js ({browser}, headless Chromium)"
        with progress(what) if progress is not None else contextlib.nullcontext():
            outcome = probe_in_browser(probed, model, browser, timeout=probe_timeout)
        attach_browser_probe(report, browser, outcome)
    return report, model


def check(
    model: str | Path,
    *,
    target: str = DEFAULT_TARGET,
    probe: bool = False,
    max_partitions: int | None = TARGET_DEFAULT,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> CheckReport:
    """What the GPU delegate of ``target`` will run of ``model``, and why; ``probe`` asks the
    real accelerator too. ``max_partitions`` -1 keeps the target's default, None takes all."""
    report, _ = check_path(
        Path(model),
        target=target,
        with_probe=probe,
        max_partitions=max_partitions,
        input_shapes=input_shapes,
    )
    return report
