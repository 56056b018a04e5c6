"""What a test needs from the machine (the GPU, adbd, sshd, a JDK, chromium, TensorFlow, the
downloaded models): when it is missing the test FAILS in CI and is skipped, with the reason,
everywhere else.

CI is ``CI=true`` in the environment (GitHub Actions, GitLab and most others set it), read here
and nowhere else in the tests.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

__all__ = ["in_ci", "unavailable"]


def in_ci() -> bool:
    """Whether the tests run in CI (``CI=true``, any case, surrounding blanks ignored)."""
    return os.environ.get("CI", "").strip().lower() == "true"


def unavailable(reason: str) -> NoReturn:
    """Stop the test for a missing requirement: fail in CI, skip with ``reason`` elsewhere."""
    __tracebackhide__ = True  # report the line that needed it, not this one
    if in_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def require_module(name: str, extra: str) -> None:
    """Stop the test when ``name`` is not importable (fail in CI, skip elsewhere): the module
    ``pip install 'tflkit[EXTRA]'`` brings."""
    import importlib.util

    __tracebackhide__ = True
    if importlib.util.find_spec(name) is None:
        unavailable(f"{name} is not importable: pip install 'tflkit[{extra}]'")
