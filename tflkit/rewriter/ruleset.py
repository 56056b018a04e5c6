"""An ordered, named collection of rules."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from tflkit.errors import UsageError
from tflkit.rewriter.rule import Rule


class RuleSet:
    """Rules in the order the pass manager tries them; names are unique."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        names = [r.name for r in self.rules]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate rule names: {duplicates}")
        self._by_name = {r.name: r for r in self.rules}

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def names(self) -> list[str]:
        return list(self._by_name)

    def get(self, name: str) -> Rule:
        try:
            return self._by_name[name]
        except KeyError:
            raise UsageError(
                f"no rewrite rule {name!r}; known rules: {', '.join(self.names())}"
            ) from None

    def select(self, names: Sequence[str]) -> RuleSet:
        """The named rules (opt-in ones included), in the order given."""
        return RuleSet(self.get(n) for n in names)

    def defaults(self) -> RuleSet:
        """Rules that run without being named (no opt-in approximations)."""
        return RuleSet(r for r in self.rules if not r.opt_in)
