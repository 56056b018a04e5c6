"""The rewrite rules: the catalogue, and the rules that may fix an op type.

:func:`catalog` is every rule, in the order the pass manager tries them (:mod:`.catalogue`,
which imports every rule module). :func:`fixing` is the catalogue's rules that may fix an op of
one type, found in :mod:`.index` (generated from the catalogue, kept current by a test) and
imported alone: ``check`` of a model with one rejected op type loads the few rules that may fix
it, not all forty (and none when the target takes every op).
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tflkit.rewriter.ruleset import RuleSet


def catalog() -> RuleSet:
    """Every rule (opt-in ones flagged); ``catalog().defaults()`` is the default run."""
    from tflkit.rewriter.rules.catalogue import CATALOG

    return CATALOG


@functools.cache
def fixing(op_type: str) -> RuleSet:
    """The catalogue's rules whose pattern may accept an op of ``op_type``, in the catalogue's
    order, opt-in ones flagged; only their modules are imported."""
    from tflkit.rewriter.rules.index import RULES
    from tflkit.rewriter.ruleset import RuleSet, opt_in

    entries = []
    for _name, module, cls, is_opt_in, fixes in RULES:
        if fixes is None or op_type in fixes:
            rule = getattr(importlib.import_module(f"{__name__}.{module}"), cls)()
            entries.append(opt_in(rule) if is_opt_in else rule)
    return RuleSet(entries)


__all__ = ["catalog", "fixing"]
