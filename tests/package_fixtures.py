"""One build of tflkit per test session (wheel and sdist from a clean copy), and venvs that hold
it (a plugin of ``tests/conftest.py``): ``built`` and :func:`venv_python`.

The build and each venv are made once per process (one per xdist worker).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import package_env


@dataclass(frozen=True)
class Built:
    """The clean copy and what ``python -m build`` made of it."""

    src: Path
    wheel: Path
    sdist: Path


@functools.cache
def _built(root: Path) -> Built:
    src = package_env.clean_copy(root / "src")
    wheel, sdist = package_env.build_dists(src, root / "dist")
    return Built(src, wheel, sdist)


@functools.cache
def _venv(root: Path, kind: str, extras: tuple[str, ...], more: tuple[str, ...]) -> Path:
    built = _built(root)
    dist = built.wheel if kind == "wheel" else built.sdist
    name = "-".join((kind, *extras, *more)) or kind
    return package_env.installed(root / name, dist, built.wheel, extras, more)


_ROOT: list[Path] = []


def _root(factory: pytest.TempPathFactory) -> Path:
    if not _ROOT:
        _ROOT.append(factory.mktemp("package"))
    return _ROOT[0]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return _built(_root(tmp_path_factory))


def venv_python(
    factory: pytest.TempPathFactory,
    kind: str = "wheel",
    extras: tuple[str, ...] = (),
    more: tuple[str, ...] = (),
) -> Path:
    """The python of a venv with the ``kind`` dist (wheel or sdist) and only the installed
    dependencies of its core plus ``extras`` (and the plain distributions ``more``)."""
    return _venv(_root(factory), kind, tuple(extras), tuple(more))


@pytest.fixture(scope="session")
def core_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel in a venv with its core dependencies only: no extra is installed."""
    return venv_python(tmp_path_factory)
