"""tflkit as users get it: ``python -m build`` from a clean copy, wheel and sdist installed into
fresh venvs (tflkit only from the package, never this checkout), every command on the bundled
example; the wheel ships every module and data file, and a build that leaves one out is caught.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import package_env
from tests.package_fixtures import Built, venv_python

pytestmark = pytest.mark.usefixtures("built")


def tflkit_in(
    python: Path, args: list[str], cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess:
    """``tflkit ARGS`` from the venv of ``python`` (its console script), in ``cwd``."""
    return subprocess.run(
        [str(python.parent / "tflkit"), *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, env=package_env.isolated_env(python.parent.parent),
    )  # fmt: skip


def test_the_wheel_ships_every_module_and_data_file(built: Built):
    expected = package_env.tree_files(built.src)
    tracked = subprocess.run(
        ["git", "ls-files", *package_env.SOURCES], cwd=package_env.ROOT, capture_output=True,
        text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert len(expected) == len(tracked) > 250  # the copy is the whole tree, no more, no less
    assert {".py", ".tflite", ".onnx", ".html", ".js", ".j2"} <= {Path(f).suffix for f in expected}
    assert package_env.missing_from_wheel(expected, package_env.wheel_files(built.wheel)) == []


def test_the_sdist_ships_every_source_file_and_the_build_files(built: Built):
    shipped = set(package_env.sdist_files(built.sdist))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        assert name in shipped
    sources = [p.relative_to(built.src).as_posix() for folder in package_env.SOURCES
               for p in (built.src / folder).rglob("*") if p.is_file()]  # fmt: skip
    assert sorted(set(sources) - shipped) == []


def test_the_coverage_check_names_a_module_left_out(built: Built):
    expected = package_env.tree_files(built.src)
    module = next(f for f in expected if f.startswith("tflkit/converters/") and f.endswith(".py"))
    data = next(f for f in expected if f.endswith(".j2"))
    for left_out in (module, data):
        shipped = [n for n in package_env.wheel_files(built.wheel) if n != left_out]
        assert package_env.missing_from_wheel(expected, shipped) == [left_out]


def test_a_build_that_leaves_a_package_out_fails_the_check(built: Built, tmp_path: Path):
    """A real build from a copy whose setup.py drops one package: the check names its files."""
    src = package_env.clean_copy(tmp_path / "src")
    setup = src / "setup.py"
    text = setup.read_text()
    broken = text.replace(
        "    return sorted(found)", '    return sorted(set(found) - {"tflkit.validation.inputs"})'
    )
    assert broken != text, "setup.py changed: update the line this test breaks"
    setup.write_text(broken)
    done = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "d"), "."],
        cwd=src,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    (wheel,) = (tmp_path / "d").glob("*.whl")
    missing = package_env.missing_from_wheel(
        package_env.tree_files(src), package_env.wheel_files(wheel)
    )
    assert missing and all(m.startswith("tflkit/validation/inputs/") for m in missing), missing
    assert "tflkit/validation/inputs/__init__.py" in missing


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_tflkit_comes_from_the_package_not_the_checkout(
    kind: str, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
):
    python = venv_python(tmp_path_factory, kind)
    where, path = package_env.where_from(python, tmp_path)
    assert where.is_relative_to(python.parent.parent), where
    root = str(package_env.ROOT)
    assert not [p for p in path if p.startswith(root)], path  # "" is the cwd: a tmp folder


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_every_command_works_on_the_bundled_example(
    kind: str, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
):
    python = venv_python(tmp_path_factory, kind)
    example = package_env.example_path(python, tmp_path)
    assert example.is_relative_to(python.parent.parent) and example.is_file()
    fixed = tmp_path / "fixed.tflite"
    for args in (
        ["inspect", str(example)],
        ["check", "--probe", str(example)],
        ["rewrite", str(example), "-o", str(fixed)],
        ["check", "--probe", str(fixed)],
        ["validate", str(fixed), "--html", str(tmp_path / "validate.html")],
        ["--help"],
    ):
        done = tflkit_in(python, args, tmp_path)
        assert done.returncode == 0, (args, done.stdout[-1500:], done.stderr[-1500:])
    before, after = (
        json.loads(tflkit_in(python, ["check", "--json", str(m)], tmp_path).stdout)["cpu_ops"]
        for m in (example, fixed)
    )
    assert after < before, (before, after)
    assert (tmp_path / "validate.html").stat().st_size > 1000
    module = subprocess.run(
        [str(python), "-m", "tflkit", "--help"], cwd=tmp_path, capture_output=True, text=True,
        env=package_env.isolated_env(python.parent.parent),
    )  # fmt: skip
    assert module.returncode == 0 and "Usage: tflkit" in module.stdout, module.stderr


@pytest.mark.gpu
def test_the_demo_conversion_runs_from_the_wheel(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
):
    """The demo's first step: the bundled ONNX twin to a GPU-ready .tflite (the ONNX converter's
    own environment, in the test cache as ./dev.sh test builds it; built here if missing)."""
    from tests.conftest_corpus import cache_root

    python = venv_python(tmp_path_factory)
    onnx = package_env.example_path(python, tmp_path).with_suffix(".onnx")
    out = tmp_path / "tiny_classifier_onnx.tflite"
    done = subprocess.run(
        [str(python.parent / "tflkit"), "convert", "--gpu-ready", str(onnx), "-o", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=1800,
        env={**package_env.isolated_env(python.parent.parent),
             "TFLKIT_CONVERTERS_DIR": str(cache_root() / "converters")},
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout[-1500:], done.stderr[-1500:])
    assert "gpu-ready" in done.stdout and out.is_file()
