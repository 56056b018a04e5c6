"""Why a ``validate`` report is inconclusive: which comparisons said nothing, and why.

A verdict of "inconclusive" without its reason reads as a pass that did not happen; the reason
goes into the findings, so the terminal, JSON and HTML reports all carry it: the pairs, each
output's reason (constant or ~0 on these inputs, and its value), and the inputs that got random
data for want of anything better.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tflkit.compare.comparator import PairComparison

__all__ = ["inconclusive_reason"]


def inconclusive_reason(pairs: Sequence[PairComparison], inputs: Mapping[str, Any]) -> str:
    """One finding: the pairs compared, each output's reason, the inputs that were random."""
    reasons: dict[str, str] = {}
    for pair in pairs:
        for out in pair.outputs:
            if out.verdict == "not-meaningful" and out.reasons:
                reasons.setdefault(out.name, out.reasons[0])
    outputs = "; ".join(f"output {name}: {why}" for name, why in reasons.items())
    random = [str(i.get("name")) for i in inputs.get("inputs", []) if i.get("data") == "random"]
    fed = f"; inputs {', '.join(random)} got random data" if random else ""
    return (
        f"inconclusive: nothing meaningful compared in {', '.join(p.key for p in pairs)} "
        f"({outputs or 'every output constant or ~0 on these inputs'}){fed}: give inputs that "
        "exercise the model (--inputs)"
    )
