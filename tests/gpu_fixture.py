"""Pytest plugin: the ``gpu`` fixture and marker for tests that need the real GPU accelerator.

Load it from ``tests/conftest.py`` with ``pytest_plugins = ["tests.gpu_fixture"]``. A test that
needs the accelerator is marked ``@pytest.mark.gpu`` and takes the ``gpu`` fixture. When the
accelerator is missing the test FAILS in CI and is skipped with the reason on a developer
machine (:func:`tests.needs.unavailable`). A test marked ``gpu`` that does not ask for the
fixture gets the same check before it runs.
"""

from __future__ import annotations

import pytest

from tests.needs import unavailable
from tflkit.gpu.availability import gpu_available

GPU_MARKER = (
    "gpu: needs the real LiteRT GPU accelerator (software GPU in CI); fails in CI when missing"
)


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``gpu`` marker (harmless if pyproject registers it too)."""
    config.addinivalue_line("markers", GPU_MARKER)


def _require_gpu() -> str:
    ok, reason = gpu_available()
    if not ok:
        unavailable(f"GPU accelerator unavailable: {reason}")
    return reason


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Apply the GPU check to every test marked ``gpu``, fixture or not."""
    if item.get_closest_marker("gpu") is not None:
        _require_gpu()


@pytest.fixture(scope="session")
def gpu() -> str:
    """The adapter description when the GPU accelerator works; fail (CI) or skip otherwise."""
    return _require_gpu()
