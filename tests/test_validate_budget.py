"""Input shapes from the model and a memory budget measured before the run: a model of 85
rank-1 ``[?]`` inputs stored as ``[1]`` validates at ``[1]`` in bounded memory; a model that
cannot fit at the shapes asked for is one line and exit 2 within seconds, never an OOM kill;
a long step says so on stderr. Real runtime, real processes, models built with TensorFlow."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from contextlib import redirect_stderr

import pytest

from tests.truth_models import SCALARS, truth_models
from tflkit import ir
from tflkit.cli.heartbeat import Heartbeat
from tflkit.validation.budget import input_specs, measure_inference, parse_size
from tflkit.validation.options import ValidateOptions


@pytest.fixture(scope="module")
def families():
    return truth_models()


#: Runs the command given as arguments and prints the peak resident set (kB) of it and its
#: descendants. A fresh interpreter of its own: this test process's RUSAGE_CHILDREN holds every
#: earlier test's children (a TensorFlow child of 1.3 GB), and a child forked from a large
#: process inherits its ``ru_maxrss``.
_PEAK_OF = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "sys.stdout.write(done.stdout); sys.stderr.write(done.stderr)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(done.returncode)\n"
)


def test_dynamic_dimensions_take_the_stored_shape(families):
    model = ir.load(families / "many_scalars.tflite")
    specs = input_specs(model, ValidateOptions())
    assert len(specs) == SCALARS
    for spec in specs:
        assert spec.tensor.shape_signature == (-1,) and spec.tensor.shape == (1,)
        assert spec.shape == (1,)  # not 16,000 samples of "audio"


@pytest.mark.gpu
def test_85_scalar_inputs_validate_in_bounded_memory(families, gpu, tmp_path):
    path = families / "many_scalars.tflite"
    tflkit = [sys.executable, "-m", "tflkit", "validate", str(path), "-n", "2", "--json"]
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_OF, *tflkit],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["verdict"] == "pass", report["findings"]
    assert {tuple(i["shape"]) for i in report["inputs"]["inputs"]} == {(1,)}
    # peak resident memory of any child (tflkit itself, its CPU, GPU and memory children)
    peak_mb = int(done.stderr.strip().splitlines()[-1]) / 1024
    assert peak_mb < 1024, peak_mb


def test_a_model_that_cannot_fit_is_refused_in_one_line(families, tmp_path):
    """Two inputs of 40,000 samples: each outer product is 6.4 GB. With a 1 GB budget the
    measuring child is killed at 1 GB and validate exits 2 with one line."""
    path = families / "pairwise.tflite"
    start = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tflkit",
            "validate",
            str(path),
            "--input-shape",
            "track_0=40000",
            "--input-shape",
            "track_1=40000",
            "--memory-budget",
            "1G",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    seconds = time.monotonic() - start
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("tflkit: error")]
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "does not fit in memory at input shapes track_0=40000, track_1=40000" in lines[0]
    assert "budget 1.00 GB" in lines[0]
    assert seconds < 120


def test_the_measured_need_is_the_interpreters_memory(families):
    """At 4,000 samples each outer product is 64 MB: the measured need holds it (67 MB
    measured; 17 MB at 400 samples: the interpreter itself) and stays well under a budget of
    2 GB; at 40,000 a 512 MB budget stops the child."""
    data = (families / "pairwise.tflite").read_bytes()
    need, what = measure_inference(
        data, {"track_0": [4000], "track_1": [4000]}, None, parse_size("2G"), 120
    )
    assert what == "ok" and need is not None
    assert 16e6 <= need < 1e9, need
    small, _ = measure_inference(data, {"track_0": [400], "track_1": [400]}, None, 2**31, 120)
    assert small is not None and small < need / 2
    over, why = measure_inference(
        data, {"track_0": [40000], "track_1": [40000]}, None, parse_size("512M"), 120
    )
    assert over is None and "passed 512 MB" in why


def test_sizes_parse():
    assert parse_size("4G") == 4 * 1024**3
    assert parse_size("512M") == 512 * 1024**2
    assert parse_size("2.5GiB") == int(2.5 * 1024**3)
    with pytest.raises(Exception, match="--memory-budget takes a size"):
        parse_size("lots")


def test_a_long_step_says_so_on_stderr():
    err = io.StringIO()
    with redirect_stderr(err), Heartbeat("validate", first=0.5, every=1.0) as beat:
        beat.update("running cpu")
        time.sleep(2.2)
    lines = err.getvalue().splitlines()
    assert lines and lines[0].startswith("tflkit: validate: running cpu (")
    assert len(lines) >= 2
