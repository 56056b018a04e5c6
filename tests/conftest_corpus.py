"""Pytest plugin: the test model corpus (TensorFlow-generated models and real downloaded ones).

Load it from ``tests/conftest.py`` with ``pytest_plugins = ["tests.conftest_corpus"]``.

Fixtures (session-scoped): ``corpus_dir`` (the generated models' directory), ``corpus``
(``.path(name)``, ``.names()``), ``real_models`` (paths of a few real float models) and
``world_models`` (``{"source/stem": path}`` of every real third-party model in
``tests.corpus.fetch.SOURCES``; names and tags: ``fetch.world_names()``, ``fetch.world_tags()``).
The cache lives in ``~/.cache/tflkit-tests`` unless ``TFLKIT_TEST_CACHE`` says otherwise; this
module is the only place that reads it. TensorFlow is never imported here: the models are made by
one ``python -m tests.corpus.generate`` subprocess, keyed by a hash of ``generate.py`` and the
TensorFlow version so editing a generator regenerates the corpus.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import pytest

from tests.corpus import generate
from tests.corpus.fetch import FetchError, fetch_real_float, fetch_world
from tests.needs import unavailable
from tflkit.fsio import exclusive_lock

CACHE_ENV = "TFLKIT_TEST_CACHE"
REPO = Path(__file__).resolve().parents[1]
MANIFEST = "MANIFEST"
GENERATE_TIMEOUT_S = 900
TF_DISTRIBUTIONS = ("tensorflow-cpu", "tensorflow", "tf-nightly-cpu", "tf-nightly")


class CorpusError(RuntimeError):
    """The corpus could not be generated."""


def cache_root() -> Path:
    """The test cache directory (``TFLKIT_TEST_CACHE`` or ``~/.cache/tflkit-tests``)."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache/tflkit-tests"


def build_with_script(
    script: Path,
    out: Path,
    *,
    done_marker: str,
    what: str,
    timeout_s: int = 900,
    subdirs: tuple[str, ...] = (),
) -> Path:
    """``out``, built once by ``python script DIR`` in a fresh interpreter (TensorFlow stays out
    of the test process): the script writes into a temporary sibling, renamed into place when it
    succeeds. Built already when ``out / done_marker`` exists; a failing script fails the test
    with the end of its stderr. Processes that need it at once (xdist workers) build it
    once: the first holds a lock beside it, the others wait and find it built."""
    if (out / done_marker).is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(out.with_name(out.name + ".lock")):
        if (out / done_marker).is_file():
            return out
        shutil.rmtree(out, ignore_errors=True)  # a build killed before its marker
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for sub in subdirs:
            (tmp / sub).mkdir(exist_ok=True)
        env = dict(os.environ, PYTHONPATH=str(REPO))
        done = subprocess.run(
            [sys.executable, str(script), str(tmp)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            pytest.fail(f"{what} generation failed:\n{done.stderr[-3000:]}", pytrace=False)
        os.replace(tmp, out)
    return out


def tensorflow_version() -> str | None:
    """The installed TensorFlow version, read without importing TensorFlow (None if absent)."""
    if importlib.util.find_spec("tensorflow") is None:
        return None
    for dist in TF_DISTRIBUTIONS:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def corpus_key(tf_version: str) -> str:
    source = b"\0".join(path.read_bytes() for path in generate.SOURCE_FILES)
    digest = hashlib.sha256(source + b"\0" + tf_version.encode()).hexdigest()[:16]
    return f"tf{tf_version}-{digest}"


def _run_generator(outdir: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "tests.corpus.generate", str(outdir)]
    try:
        done = subprocess.run(
            cmd,
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=GENERATE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise CorpusError(f"corpus generation timed out after {GENERATE_TIMEOUT_S}s") from exc
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        failed = [line for line in lines if line.startswith("FAILED ")] or lines[-15:]
        raise CorpusError("corpus generation failed:\n" + "\n".join(failed))


def ensure_generated(root: Path, tf_version: str) -> Path:
    """Return the directory holding every generated model, generating it once per key."""
    parent = root / "generated"
    parent.mkdir(parents=True, exist_ok=True)
    final = parent / corpus_key(tf_version)
    with exclusive_lock(parent / ".lock"):
        if (final / MANIFEST).is_file():
            return final
        tmp = Path(tempfile.mkdtemp(dir=parent, prefix=".tmp-"))
        try:
            _run_generator(tmp)
            names = sorted(p.stem for p in tmp.glob("*.tflite"))
            missing = sorted(set(generate.GENERATORS) - set(names))
            if missing:
                raise CorpusError(f"generator wrote no model for {missing}")
            (tmp / MANIFEST).write_text("\n".join(names) + "\n")
            shutil.rmtree(final, ignore_errors=True)  # a leftover without MANIFEST
            os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


class Corpus:
    """The generated models of one corpus directory, by name."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def names(self) -> list[str]:
        """Every model name, in the generator's order."""
        return list(generate.GENERATORS)

    def path(self, name: str) -> Path:
        """The ``.tflite`` file of model ``name``."""
        if name not in generate.GENERATORS:
            raise KeyError(f"no corpus model {name!r}; known: {', '.join(self.names())}")
        return self.directory / f"{name}.tflite"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """Directory of the generated models (generated in a subprocess if needed)."""
    version = tensorflow_version()
    if version is None:
        unavailable(
            "TensorFlow is not importable (install the 'test' extra) so the model "
            "corpus cannot be generated"
        )
    try:
        return ensure_generated(cache_root(), version)
    except CorpusError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def llm_corpus() -> Path:
    """Directory of the tiny LLM graphs (``{arch}.tflite``, ``MANIFEST.json``), built once per
    version of ``tests/corpus/llm_build.py`` in its own environment."""
    from tests.corpus.llm_steps import corpus_dir as llm_corpus_dir

    try:
        return llm_corpus_dir()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def llm_bundles() -> Path:
    """Directory of the tiny ``.litertlm`` bundles (``{name}.litertlm``, ``MANIFEST.json``),
    built once per version of ``tests/corpus/llm_bundle_build.py`` in the LLM builder's
    environment."""
    from tests.corpus.llm_bundles import bundles_dir

    try:
        return bundles_dir()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def corpus(corpus_dir: Path) -> Corpus:
    """The generated models: ``corpus.path("conv_dense")``, ``corpus.names()``."""
    return Corpus(corpus_dir)


@pytest.fixture(scope="session")
def real_models() -> list[Path]:
    """A small set of real float ``.tflite`` models, ``tests.corpus.fetch.REAL_FLOAT`` in order
    (downloaded once into the cache)."""
    try:
        return fetch_real_float(cache_root() / "real")
    except FetchError as exc:
        unavailable(f"real test models unavailable: {exc}")


@pytest.fixture(scope="session")
def world_models() -> dict[str, Path]:
    """Every real third-party model, ``{"openwakeword/hey_jarvis_v0.1": path, ...}``."""
    try:
        return fetch_world(cache_root() / "real")
    except FetchError as exc:
        unavailable(f"real test models unavailable: {exc}")
