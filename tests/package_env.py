"""tflkit as users get it: built from a clean copy of the tree, installed into a fresh venv.

- :func:`clean_copy`: the tracked files only (``git archive`` of HEAD plus the uncommitted changes
  to tracked files, through ``git stash create``): no ``.venv``, no ``egg-info``, no build folder.
- :func:`build_dists`: wheel and sdist with the standard front end (``python -m build``, build
  isolation: the venv's setuptools is older than pyproject's ``>= 77``).
- :func:`missing_from_wheel`: every module and data file of ``tflkit/``, ``converters/`` and
  ``delegates/`` under its installed name, less the wheel's file list.
- :func:`dependency_site` + :func:`fresh_venv`: a venv without system site-packages that gets
  tflkit only from the wheel or sdist and its dependencies from a folder of links to the
  distributions already installed here, chosen from the wheel's own ``Requires-Dist`` (core, plus
  the extras asked for): nothing is downloaded but the build backend, and a venv "without the
  extras" really lacks them.

``python -m tests.package_env DIR`` builds both, installs each and prints where tflkit came from.
"""

from __future__ import annotations

import email.parser
import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import venv
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
#: source folder -> the package it installs as (pyproject's package-dir mapping)
SOURCES = {"tflkit": "tflkit", "converters": "tflkit/converters", "delegates": "tflkit/delegates"}


def clean_copy(dest: Path, repo: Path = ROOT) -> Path:
    """The tree's tracked files (HEAD plus uncommitted changes to them) in ``dest``."""
    stash = subprocess.run(
        ["git", "stash", "create"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", stash or "HEAD"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def build_dists(tree: Path, out: Path, python: str = sys.executable) -> tuple[Path, Path]:
    """``python -m build`` in ``tree``: (wheel, sdist) in ``out``; the log beside them."""
    out.mkdir(parents=True, exist_ok=True)
    log = out / "build.log"
    with log.open("w") as handle:
        done = subprocess.run(
            [python, "-m", "build", "--outdir", str(out), str(tree)],
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=tree,
        )
    if done.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise RuntimeError(f"python -m build failed (exit {done.returncode}):\n{tail}")
    (wheel,) = out.glob("tflkit-*.whl")
    (sdist,) = out.glob("tflkit-*.tar.gz")
    return wheel, sdist


def tree_files(tree: Path) -> list[str]:
    """Every file of the source folders (modules and data) under its installed path."""
    found = []
    for folder, installed in SOURCES.items():
        for path in sorted((tree / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                found.append(f"{installed}/{path.relative_to(tree / folder).as_posix()}")
    return found


def wheel_files(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def sdist_files(sdist: Path) -> list[str]:
    """The sdist's files relative to its top folder (``tflkit-0.1.0/``)."""
    with tarfile.open(sdist) as archive:
        members = archive.getmembers()
    return [m.name.split("/", 1)[1] for m in members if m.isfile() and "/" in m.name]


def missing_from_wheel(expected: Iterable[str], shipped: Iterable[str]) -> list[str]:
    """The files of ``expected`` (installed paths) the wheel's list ``shipped`` lacks."""
    have = set(shipped)
    return sorted(name for name in expected if name not in have)


def wheel_requirements(wheel: Path) -> list[Requirement]:
    """The wheel's own ``Requires-Dist`` (its METADATA, not the editable install's)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        meta = email.parser.Parser().parsestr(archive.read(name).decode())
    return [Requirement(line) for line in meta.get_all("Requires-Dist") or []]


def extras_of(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        meta = email.parser.Parser().parsestr(archive.read(name).decode())
    return set(meta.get_all("Provides-Extra") or [])


def _closure(roots: Iterable[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions ``roots`` need, transitively (markers evaluated here)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        req = todo.pop()
        key = canonicalize_name(req.name)
        if key in found or key == "tflkit":
            continue
        dist = importlib.metadata.distribution(req.name)  # PackageNotFoundError: not installed
        if not req.specifier.contains(dist.version, prereleases=True):
            raise RuntimeError(f"installed {req.name} {dist.version} does not satisfy {req}")
        found[key] = dist
        for line in dist.requires or []:
            sub = Requirement(line)
            if sub.marker is None or sub.marker.evaluate({"extra": ""}):
                todo.append(sub)
            for extra in req.extras:
                if sub.marker is not None and sub.marker.evaluate({"extra": extra}):
                    todo.append(sub)
    return found


def requirements_for(wheel: Path, extras: Sequence[str] = (), more: Sequence[str] = ()) -> list:
    """The wheel's core requirements, those of ``extras`` and the plain names in ``more``."""
    picked, wanted, seen = [], list(extras), set()
    while wanted:  # an extra may name others (``all = ["tflkit[convert,...]"]``)
        extra = wanted.pop()
        seen.add(extra)
        for req in wheel_requirements(wheel):
            if req.marker is None or not req.marker.evaluate({"extra": extra}):
                continue
            if canonicalize_name(req.name) == "tflkit":
                wanted += [e for e in req.extras if e not in seen]
            else:
                picked.append(req)
    core = [r for r in wheel_requirements(wheel) if r.marker is None]
    return core + picked + [Requirement(name) for name in more]


def dependency_site(dest: Path, requirements: Iterable[Requirement]) -> Path:
    """A folder of links to the installed distributions ``requirements`` need (top-level
    packages, modules and dist-info folders), for a venv's ``.pth``."""
    dest.mkdir(parents=True, exist_ok=True)
    for dist in _closure(requirements).values():
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in sorted(tops):
            source = Path(str(dist.locate_file(top)))
            link = dest / top
            if source.exists() and not link.exists() and top != "__pycache__":
                link.symlink_to(source)
    return dest


def fresh_venv(path: Path, site: Path) -> Path:
    """A venv (no pip, no system site-packages) whose only other packages are ``site``'s."""
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(path)
    (purelib,) = path.glob("lib/python*/site-packages")
    (purelib / "zz_tflkit_deps.pth").write_text(f"{site}\n")
    return path / "bin" / "python"


def pip_install(python: Path, dist: Path, *, isolation: bool = True) -> None:
    """Install ``dist`` (a wheel or an sdist) into ``python``'s venv, without dependencies."""
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q"]
    done = subprocess.run([*cmd, str(dist)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"pip install {dist.name} failed: {done.stderr[-2000:]}")


def isolated_env(venv_dir: Path) -> dict[str, str]:
    """An environment for the venv's commands: its bin first, nothing of this checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv_dir)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    return env


WHERE = (
    "import sys, tflkit, importlib.metadata as m; print(tflkit.__file__); "
    "print(m.version('tflkit')); print('\\n'.join(sys.path))"
)


def where_from(python: Path, cwd: Path) -> tuple[Path, list[str]]:
    """Where the venv's ``import tflkit`` comes from, and its ``sys.path``."""
    done = subprocess.run(
        [str(python), "-c", WHERE], cwd=cwd, capture_output=True, text=True, check=True,
        env=isolated_env(python.parent.parent),
    )  # fmt: skip
    lines = done.stdout.splitlines()
    return Path(lines[0]), lines[2:]


def example_path(python: Path, cwd: Path) -> Path:
    """The bundled example, found through the installed package."""
    code = (
        "import importlib.resources as r; "
        "print(r.files('tflkit') / 'examples' / 'tiny_classifier.tflite')"
    )
    done = subprocess.run(
        [str(python), "-c", code], cwd=cwd, capture_output=True, text=True, check=True,
        env=isolated_env(python.parent.parent),
    )  # fmt: skip
    return Path(done.stdout.strip())


def installed(work: Path, dist: Path, wheel: Path, extras: Sequence[str] = (),
              more: Sequence[str] = ()) -> Path:  # fmt: skip
    """A venv in ``work`` holding ``dist`` and the installed dependencies of ``wheel``'s
    requirements with ``extras`` (plus ``more``); its python."""
    site = dependency_site(work / "deps", requirements_for(wheel, extras, more))
    python = fresh_venv(work / "venv", site)
    pip_install(python, dist)
    return python


#: commands a CI step calls that come from linked distributions (no console script of their own)
SHIMS = ("pip", "pytest")


def runner_venv(work: Path, wheel: Path) -> Path:
    """A CI runner's Python: a fresh venv with pip, pytest and ``wheel``'s core dependencies
    (linked) but no tflkit, which the CI example's own ``pip install`` step installs; ``pip``
    and ``pytest`` run this venv's Python. Its python."""
    site = dependency_site(work / "deps", requirements_for(wheel, (), SHIMS))
    python = fresh_venv(work / "venv", site)
    for name in SHIMS:
        shim = python.parent / name
        shim.write_text(f'#!/bin/sh\nexec "{python}" -m {name} "$@"\n')
        shim.chmod(0o755)
    return python


def main(argv: Sequence[str]) -> int:
    out = Path(argv[0]) if argv else Path("/tmp/tflkit-package")
    wheel, sdist = build_dists(clean_copy(out / "src"), out / "dist")
    missing = missing_from_wheel(tree_files(out / "src"), wheel_files(wheel))
    print(f"built {wheel.name} and {sdist.name}; missing from the wheel: {missing or 'nothing'}")
    for dist in (wheel, sdist):
        python = installed(out / re.sub(r"\W", "_", dist.name), dist, wheel)
        print(f"{dist.name}: tflkit from {where_from(python, out)[0]} ({python})")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
