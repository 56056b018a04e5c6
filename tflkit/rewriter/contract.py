"""How far a rewrite may move a model's outputs: a rule's numeric contract and its algebra."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Contract:
    """How far a rewrite may move the outputs: ``|new - old| <= max_abs + max_rel * |old| +
    peak_rel * max|old|`` (``max|old|``: the output's peak, over its finite values).

    All zero means exact: outputs must be bit-identical.
    """

    max_abs: float = 0.0
    max_rel: float = 0.0
    note: str = "bit-identical"
    peak_rel: float = 0.0

    @property
    def exact(self) -> bool:
        return self.max_abs == 0.0 and self.max_rel == 0.0 and self.peak_rel == 0.0

    def describe(self) -> str:
        if self.exact:
            return "exact (bit-identical)"
        if self.peak_rel and not (self.max_abs or self.max_rel):
            return f"within {self.peak_rel:g} of each output's peak ({self.note})"
        peak = f", {self.peak_rel:g} of the output's peak" if self.peak_rel else ""
        return f"max abs {self.max_abs:g}, max rel {self.max_rel:g}{peak} ({self.note})"


EXACT = Contract()


def bound(max_abs: float, max_rel: float = 0.0, note: str = "float rounding") -> Contract:
    """An approximate contract with its stated error bound."""
    return Contract(max_abs, max_rel, note)


def combine(contracts: Sequence[Contract]) -> Contract:
    """The contract of several rewrites applied together (bounds add up)."""
    inexact = [c for c in contracts if not c.exact]
    if not inexact:
        return EXACT
    return Contract(
        sum(c.max_abs for c in inexact),
        sum(c.max_rel for c in inexact),
        "; ".join(dict.fromkeys(c.note for c in inexact)),
        sum(c.peak_rel for c in inexact),
    )
