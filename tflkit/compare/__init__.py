"""Comparison of run results: metrics, tolerances, the comparator and op localization."""
