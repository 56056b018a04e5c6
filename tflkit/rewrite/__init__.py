"""Rewrite ops the GPU delegate rejects into equivalents it takes, and prove the swap."""

from tflkit.rewrite.passes import PassResult, run_passes
from tflkit.rewrite.rule import EXACT, Contract, Example, Rule, bound
from tflkit.rewrite.ruleset import RuleSet
from tflkit.rewrite.run import RewriteOutcome, RewriteRefused, rewrite_file, rewrite_model

__all__ = [
    "EXACT",
    "Contract",
    "Example",
    "PassResult",
    "RewriteOutcome",
    "RewriteRefused",
    "Rule",
    "RuleSet",
    "bound",
    "rewrite_file",
    "rewrite_model",
    "run_passes",
]
