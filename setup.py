"""Packages are found, not listed: a new subpackage cannot be left out of the wheel or sdist.

`converters/` and `delegates/` install as `tflkit.converters` and `tflkit.delegates` (the
`package-dir` mapping in pyproject.toml), so their subpackages are found there and renamed.
Everything else about the build is in pyproject.toml.
"""

from setuptools import find_packages, setup

MAPPED = ("converters", "delegates")


def packages() -> list[str]:
    """tflkit's packages and the mapped folders', under their installed names."""
    found = find_packages(include=["tflkit", "tflkit.*"])
    for folder in MAPPED:
        found += [f"tflkit.{name}" for name in find_packages(include=[folder, f"{folder}.*"])]
    return sorted(found)


setup(packages=packages())
