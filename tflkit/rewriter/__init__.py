"""Rewrite ops the GPU delegate rejects into equivalents it takes, and prove the swap.

The package re-exports nothing: ``check`` imports :mod:`tflkit.rewriter.advice` without the
pass manager and the rules. The entry points are ``tflkit.rewriter.run.rewrite_file`` and
``rewrite_model``; rules live in ``tflkit.rewriter.rules`` and follow ``tflkit.rewriter.rule``.
"""
