"""Regression baselines: ``record`` a model's outputs and GPU residency, ``check`` a new build
against them, run a ``tflkit.toml`` suite, and the pytest plugin (``tflkit.regress.pytest_plugin``).

Submodules import their heavy dependencies inside functions, so importing this package is cheap.
"""
