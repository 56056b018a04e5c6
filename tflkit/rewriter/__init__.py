"""Rewrite ops the GPU delegate rejects into equivalents it takes, and prove the swap."""

from tflkit.rewriter.contract import EXACT, Contract, bound
from tflkit.rewriter.passes import PassResult, run_passes
from tflkit.rewriter.rule import Example, Rule
from tflkit.rewriter.ruleset import RuleSet
from tflkit.rewriter.run import RewriteOutcome, RewriteRefused, rewrite_file, rewrite_model

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
