"""The Android harness's protocol module (plain Java, no Android dependency) on this JDK.

``android_harness/protocol`` is compiled with ``javac`` and its own test program runs against the
shared fixtures; then the files the JVM wrote (inputs read back, results re-written) are read
here with numpy and the Python protocol code. Without a JDK the test fails in CI and skips
elsewhere.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.needs import unavailable
from tflkit.delegates.device_protocol import DTYPES, read_result

from .test_harness_protocol import FIXTURES, PROTOCOL_DIR


def _jdk() -> tuple[str, str]:
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        unavailable("no JDK (javac/java); install-system-packages.sh installs one")
    return javac, java


@pytest.fixture(scope="module")
def jvm_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    javac, java = _jdk()
    root = tmp_path_factory.mktemp("jvm")
    classes = root / "classes"
    sources = sorted(str(p) for p in (PROTOCOL_DIR / "src").rglob("*.java"))
    done = subprocess.run(
        [javac, "--release", "11", "-Xlint:all", "-Werror", "-d", str(classes), *sources],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = root / "out"
    done = subprocess.run(
        [java, "-cp", str(classes), "dev.tflkit.protocol.ProtocolTests", str(FIXTURES), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.startswith("ok: "), done.stdout + done.stderr
    return out


def test_jvm_reads_every_fixture_input_exactly(jvm_out: Path) -> None:
    """Every input the JVM read (npy and raw) comes back byte-identical to numpy's own .npy."""
    seen = set()
    for job in sorted((FIXTURES / "jobs").iterdir()):
        manifest = json.loads((job / "job.json").read_text())
        for s, entries in enumerate(manifest["input_sets"]):
            for k, entry in enumerate(entries):
                path = job / entry["file"]
                if path.suffix == ".npy":
                    expected = np.load(path)
                else:
                    expected = np.fromfile(path, np.dtype(entry["dtype"])).reshape(entry["shape"])
                written = jvm_out / "jobs" / job.name / str(s) / f"{k}.npy"
                got = np.load(written)
                assert got.dtype == expected.dtype and np.array_equal(got, expected), written
                buffer = io.BytesIO()
                np.save(buffer, expected)
                assert written.read_bytes() == buffer.getvalue(), written
                seen.add(got.dtype.name)
    assert seen == set(DTYPES)


def test_jvm_results_read_back_in_python(jvm_out: Path) -> None:
    import jsonschema  # part of the test extra: never skipped

    schema = json.loads((PROTOCOL_DIR / "result.schema.json").read_text())
    for fixture in sorted((FIXTURES / "results").iterdir()):
        written = jvm_out / "results" / fixture.name
        jsonschema.validate(json.loads((written / "result.json").read_text()), schema)
        got, expected = read_result(written), read_result(fixture)
        assert got.backends.keys() == expected.backends.keys()
        for name, backend in expected.backends.items():
            other = got.backends[name]
            assert other.status == backend.status and other.error == backend.error
            assert len(other.outputs) == len(backend.outputs)
            for g, e in zip(other.outputs, backend.outputs, strict=True):
                assert g.keys() == e.keys()
                for key in e:
                    assert g[key].dtype == e[key].dtype and np.array_equal(g[key], e[key])
        assert not (written / ".result.json.tmp").exists()
