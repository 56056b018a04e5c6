"""An ordered, named collection of rules, each flagged default or opt-in."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from tflkit.errors import UsageError
from tflkit.rewriter.rule import ModelPass, OpRewrite, Rule


@dataclass(frozen=True)
class OptIn:
    """A catalogue entry for a rule that runs only when named with ``--rule`` (an
    approximation, or a change of the model's interface)."""

    rule: Rule


def opt_in(rule: Rule) -> OptIn:
    """Flag ``rule`` opt-in in a catalogue."""
    return OptIn(rule)


class RuleSet:
    """Rules in the order the pass manager tries them; names are unique."""

    def __init__(self, entries: Iterable[Rule | OptIn]) -> None:
        listed = list(entries)
        self.rules: tuple[Rule, ...] = tuple(e.rule if isinstance(e, OptIn) else e for e in listed)
        self._opt_in = frozenset(e.rule.name for e in listed if isinstance(e, OptIn))
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

    def is_opt_in(self, rule: Rule) -> bool:
        """Whether ``rule`` runs only when named."""
        return rule.name in self._opt_in

    def get(self, name: str) -> Rule:
        try:
            return self._by_name[name]
        except KeyError:
            raise UsageError(
                f"no rewrite rule {name!r}; known rules: {', '.join(self.names())}"
            ) from None

    def select(self, names: Sequence[str]) -> RuleSet:
        """The named rules (opt-in ones included, still flagged), in the order given."""
        rule = self.get
        return RuleSet(opt_in(rule(n)) if rule(n).name in self._opt_in else rule(n) for n in names)

    def defaults(self) -> RuleSet:
        """Rules that run without being named (no opt-in ones)."""
        return RuleSet(r for r in self.rules if r.name not in self._opt_in)

    def op_rewrites(self) -> list[OpRewrite]:
        return [r for r in self.rules if isinstance(r, OpRewrite)]

    def model_passes(self) -> list[ModelPass]:
        return [r for r in self.rules if isinstance(r, ModelPass)]
