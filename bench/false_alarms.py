"""Sweep for false alarms: ``validate`` on healthy models, every failing output counted by rule.

Run from the repo root::

    PYTHONPATH=. python bench/false_alarms.py --families-only     # the mask/head family (minutes)
    PYTHONPATH=. python bench/false_alarms.py --only mltk/ --only simple-cv/
    PYTHONPATH=. python bench/false_alarms.py                     # family + the whole corpus

Every model here is healthy (the generated sigmoid/softmax heads and masks of
``tests/truth_models.py``: saturated and not, portrait and landscape; the real corpus models of
``tests/corpus/fetch.py``), so a failing output of a pair is a false alarm candidate. For each
model it runs ``validate`` on 2 realistic input sets (cpu, cpu-fp16, gpu-fp16, gpu-fp32) and
prints a row per pair: its verdict, the rule of each failing output (log-domain, value bound, argmax
flips, non-finite, cosine), and for float probabilities the largest log-probability difference
over the CPU's fp32 log noise (what the log-domain rule, whose factor is 16, would say of the
pair were it judged in the log domain; it judges pairs that share the CPU's arithmetic only,
``tflkit/compare/log_scope.py``). The last line counts models, failing pairs and rules.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

RULES = (
    ("log-probability", "log-domain"),
    ("argmax differs", "argmax"),
    ("finite on one side", "non-finite"),
    ("beyond their own bound", "value bound"),
    ("max_abs", "value bound"),
    ("cosine", "cosine"),
)


def _rule(reason: str) -> str:
    return next((name for key, name in RULES if key in reason), "other")


def validate(path: Path) -> Any:
    """The report of ``validate`` with the default runners on 2 realistic input sets."""
    from tflkit.validation.pipeline import ValidateOptions
    from tflkit.validation.pipeline import validate as run

    return run(path, ValidateOptions(num_inputs=2))


def _log_ratio(report: Any, pair: Any, output: str) -> str:
    """The pair's largest log-probability difference over the CPU's fp32 log noise."""
    from tflkit.compare.sensitivity import log_diff

    own = ((report.sensitivity.get("fp32") or {}).get(output) or {}).get("log_max_abs")
    actual, expected = report.runner(pair.actual), report.runner(pair.expected)
    if not own or not actual.ok or not expected.ok:
        return "-"
    worst = max(
        log_diff(e[output], a[output])
        for e, a in zip(expected.outputs, actual.outputs, strict=True)
        if output in e and output in a
    )
    return f"{worst / own:.3g}"


def rows(name: str, report: Any, rules: Counter[str]) -> list[str]:
    out = []
    for pair in report.pairs:
        failing, logs = [], []
        for o in pair.outputs:
            if o.verdict == "fail":
                found = sorted({_rule(r) for r in o.reasons})
                rules.update(found)
                failing.append(f"{o.name}: {', '.join(found)}")
            if o.kind == "probabilities" and pair.verdict != "skipped":
                logs.append(_log_ratio(report, pair, o.name))
        shown = "; ".join(failing) or "-"
        out.append(f"| {name} | {pair.key} | {pair.verdict} | {shown} | {', '.join(logs) or '-'} |")
    return out


def models(families_only: bool, only: list[str]) -> dict[str, Path]:
    from tests.truth_models import MASKS, truth_models

    folder = truth_models()
    found = {f"family/{name}": folder / f"{name}.tflite" for name, *_ in MASKS}
    if not families_only:
        from tests.conftest_corpus import cache_root
        from tests.corpus.fetch import fetch_world

        found.update(fetch_world(cache_root() / "real"))
    if only:
        found = {k: v for k, v in found.items() if any(o in k for o in only)}
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families-only", action="store_true")
    parser.add_argument("--only", action="append", default=[], help="substring of model names")
    args = parser.parse_args(argv)
    rules: Counter[str] = Counter()
    failing_models = failing_pairs = 0
    chosen = models(args.families_only, args.only)
    print("| model | pair | verdict | failing outputs: rule | log diff / CPU log noise |")
    print("|---|---|---|---|---|")
    for name, path in sorted(chosen.items()):
        report = validate(path)
        lines = rows(name, report, rules)
        fails = [p for p in report.pairs if p.verdict == "fail"]
        failing_pairs += len(fails)
        failing_models += bool(fails)
        for line in lines:
            print(line, flush=True)
    counted = ", ".join(f"{k} {v}" for k, v in rules.most_common()) or "none"
    print(
        f"\n{len(chosen)} models, {failing_models} with a failing pair, {failing_pairs} failing "
        f"pairs; failing outputs by rule: {counted}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
