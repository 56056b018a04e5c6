"""``tflkit validate`` on the real GPU accelerator (software GPU: Mesa lavapipe).

Real image segmenter (deeplabv3): every figure is checked against numpy on outputs this test obtains
itself (its own Interpreter run, its own GPU run through the probe). The crash case (PACK of one
tensor twice) ends in a report; an int64 output of the GPU path is read back and compared; a
planted fp16 overflow is localized to its op; the HTML report is rendered in headless Chromium
and its numbers are read off the page.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from tests.needs import unavailable
from tflkit import ir
from tflkit.cli.main import main
from tflkit.gpu.probe import probe
from tflkit.ir.builder import OpBuilder
from tflkit.report.html import write_html
from tflkit.validation.inputs import make_input_sets
from tflkit.validation.pipeline import ValidateOptions, validate

fb = ir.schema.fb
pytestmark = pytest.mark.gpu


def _segmenter(real_models: list[Path]) -> Path:
    return next(p for p in real_models if p.name == "deeplabv3.tflite")


def _independent(expected: np.ndarray, actual: np.ndarray) -> dict[str, float]:
    e = expected.astype(np.float64).ravel()
    a = actual.astype(np.float64).ravel()
    d = a - e
    return {
        "max_abs": float(np.abs(d).max()),
        "mean_abs": float(np.abs(d).mean()),
        "rmse": float(np.sqrt(np.mean(d * d))),
        "cosine": float(e @ a / (np.linalg.norm(e) * np.linalg.norm(a))),
        "snr_db": float(10 * np.log10((e @ e) / (d @ d))) if d.any() else math.inf,
        "psnr_db": float(20 * np.log10(np.abs(e).max() / np.sqrt(np.mean(d * d))))
        if d.any()
        else math.inf,
    }


@pytest.fixture(scope="module")
def segmenter_run(real_models, gpu, tmp_path_factory):
    """validate on deeplabv3 with our own inputs, plus our own CPU and GPU outputs."""
    from ai_edge_litert.interpreter import Interpreter

    model = _segmenter(real_models)
    rng = np.random.default_rng(11)
    images = rng.uniform(-1, 1, (2, 1, 257, 257, 3)).astype(np.float32)
    folder = tmp_path_factory.mktemp("segmenter")
    np.save(folder / "inputs.npy", images)
    report = validate(
        model,
        ValidateOptions(
            runners=["cpu", "cpu-ref", "gpu-fp16", "gpu-fp32"], inputs=folder / "inputs.npy"
        ),
    )
    interpreter = Interpreter(model_path=str(model))
    interpreter.allocate_tensors()
    cpu: dict[str, list[np.ndarray]] = {}
    for x in images:
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
        interpreter.invoke()
        for d in interpreter.get_output_details():
            cpu.setdefault(d["name"], []).append(interpreter.get_tensor(d["index"]).copy())
    gpu16 = probe(model, run=True, input_sets=[{"sub_7": x} for x in images], use_cache=False)
    assert gpu16.status == "ok"
    mine = {
        "cpu": {k: np.stack(v) for k, v in cpu.items()},
        "gpu-fp16": {k: np.stack([o[k] for o in gpu16.output_sets]) for k in cpu},
    }
    return report, mine, folder


def test_segmenter_runs_everywhere_and_figures_match_numpy(segmenter_run):
    report, mine, _ = segmenter_run
    assert [r.runner for r in report.runners] == ["cpu", "cpu-ref", "gpu-fp16", "gpu-fp32"]
    assert all(r.ok for r in report.runners), [(r.runner, r.error) for r in report.runners]
    gpu = report.runner("gpu-fp16")
    assert gpu.executed["fully_accelerated"] is True
    assert gpu.executed["adapter"]["name"]
    assert len(gpu.infer_seconds) == 2 and gpu.compile_seconds > 0
    assert report.verdict == "pass", report.findings
    pair = report.pair("gpu-fp16:cpu")
    for out in pair.outputs:
        want = _independent(mine["cpu"][out.name], mine["gpu-fp16"][out.name])
        for key, value in want.items():
            assert getattr(out.metrics, key) == pytest.approx(value, rel=1e-6), (out.name, key)
        assert out.metrics.expected_peak == pytest.approx(np.abs(mine["cpu"][out.name]).max())
    # fp32 on the GPU is orders of magnitude closer to the CPU than fp16
    for f16, f32 in zip(pair.outputs, report.pair("gpu-fp32:cpu").outputs, strict=True):
        assert f32.metrics.max_abs * 100 < f16.metrics.max_abs


def test_html_report_renders_in_chromium_with_the_numbers(segmenter_run, tmp_path):
    report, mine, _ = segmenter_run
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        unavailable("chromium is not installed (apt-get install chromium)")
    page = write_html(report, tmp_path / "report.html")
    assert "http://" not in page.read_text() and "https://" not in page.read_text()
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    cells = _Cells()
    cells.feed(done.stdout)
    assert cells.verdict == "pass"
    assert cells.svgs >= 3  # one histogram per output and pair at least
    for out in report.pair("gpu-fp16:cpu").outputs:
        want = _independent(mine["cpu"][out.name], mine["gpu-fp16"][out.name])
        for key in ("max_abs", "rmse", "cosine", "snr_db"):
            shown = float(cells.values[("gpu-fp16:cpu", out.name, key)])
            assert shown == pytest.approx(want[key], rel=1e-5), (out.name, key)


class _Cells(HTMLParser):
    """Collects ``(pair, output, metric) -> data-value`` from the rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[tuple[str, str, str], str] = {}
        self.verdict: str | None = None
        self.svgs = 0
        self._row: tuple[str, str] | None = None
        self._in_verdict = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.svgs += 1
        if tag == "tr" and "data-pair" in a and "data-output" in a:
            self._row = (a["data-pair"], a["data-output"])
        if tag == "td" and self._row and "data-metric" in a:
            # the full value; the cell's text shows it to 4 significant digits
            self.values[(*self._row, a["data-metric"])] = a.get("data-value", "")
        if tag == "b" and a.get("id") == "verdict":
            self._in_verdict = True

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None
        if tag == "b":
            self._in_verdict = False

    def handle_data(self, data):
        if self._in_verdict and data.strip():
            self.verdict = data.strip()


def test_accelerator_crash_ends_in_a_report(corpus, gpu, capsys):
    code = main(["validate", str(corpus.path("pack_same_tensor")), "-n", "1", "--json"])
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == "tflkit.validate/1" and report["verdict"] == "fail"
    runners = {r["runner"]: r for r in report["runners"]}
    assert runners["cpu"]["status"] == "ok"
    for name in ("gpu-fp16", "gpu-fp32"):
        assert runners[name]["status"] == "crashed"
        assert "IsInput" in runners[name]["error"]
        assert runners[name]["executed"]["crash_site"]["op_type"] == "PACK"
    verdicts = {c["pair"]: c["verdict"] for c in report["comparisons"]}
    assert verdicts["gpu-fp16:cpu"] == verdicts["gpu-fp32:cpu"] == "skipped"


def test_int64_output_is_read_back_and_compared_on_the_gpu(corpus, gpu):
    model = corpus.path("int64_argmax")
    report = validate(
        model, ValidateOptions(runners=["cpu", "gpu-fp16"], num_inputs=2, input_kind="random")
    )
    gpu_run = report.runner("gpu-fp16")
    assert gpu_run.ok and not gpu_run.unreadable
    (out,) = [o for o in report.pair("gpu-fp16:cpu").outputs if o.kind == "index"]
    assert out.verdict == "pass" and out.metrics.elements > 0 and not report.unverified
    # It is the argmax of the input, checked here with numpy on the GPU's own values.
    assert report.inputs["count"] == 2 and report.inputs["seed"] == 0
    inputs = make_input_sets(ir.load(model), count=2, seed=0).feeds
    for feed, values in zip(inputs, gpu_run.outputs, strict=True):
        (x,) = feed.values()
        assert values[out.name].dtype == np.int64
        assert np.array_equal(values[out.name], np.argmax(x, axis=-1))


def _overflow_model(path: Path) -> Path:
    """x (1, 4096) -> *16 -> square -> SUM -> /4096 -> SQRT: the SUM exceeds fp16's 65504."""
    model = ir.Model(description="planted fp16 overflow")
    graph = model.add_subgraph("main")
    x = graph.new_tensor("x", (1, 4096), np.float32)
    b = OpBuilder(graph, prefix="f")
    v = b.MUL(x, np.array(16.0, np.float32), options=fb.MulOptionsT(), name="scale")
    sq = b.MUL(v, v, options=fb.MulOptionsT(), name="square")
    reducer = fb.ReducerOptionsT()
    reducer.keepDims = True
    s = b.SUM(sq, np.array([1], np.int32), options=reducer, shape=(1, 1), name="sum_sq")
    m = b.DIV(s, np.array(4096.0, np.float32), options=fb.DivOptionsT(), name="mean_sq")
    r = b.SQRT(m, name="rms")
    graph.inputs, graph.outputs = [x], [r]
    model.signatures.append(ir.SignatureDef("serving_default", graph, {"x": x}, {"rms": r}))
    ir.save(model, path)
    return path


def test_localize_names_the_op_that_overflows_fp16(gpu, tmp_path, capsys):
    model = _overflow_model(tmp_path / "overflow.tflite")
    explorer = tmp_path / "node_data.json"
    code = main(
        [
            "validate",
            str(model),
            "-n",
            "2",
            "--localize",
            "--json",
            "--model-explorer",
            str(explorer),
        ]
    )
    assert code == 1
    report = json.loads(capsys.readouterr().out)
    runners = {r["runner"]: r["status"] for r in report["runners"]}
    assert runners == {"cpu": "ok", "cpu-fp16": "ok", "gpu-fp16": "ok", "gpu-fp32": "ok"}
    verdicts = {c["pair"]: c["verdict"] for c in report["comparisons"]}
    assert verdicts == {"cpu-fp16:cpu": "fail", "gpu-fp16:cpu": "fail", "gpu-fp32:cpu": "pass"}
    for pair in ("cpu-fp16:cpu", "gpu-fp16:cpu"):
        (fp16,) = [c for c in report["comparisons"] if c["pair"] == pair]
        metrics = fp16["outputs"][0]["metrics"]
        assert metrics["inf_actual"] == 2 and metrics["inf_expected"] == 0
    loc = report["localization"]
    assert loc["runner"] == "cpu-fp16"  # the first failing pair's runner
    ops = {op["op_index"]: op for op in loc["ops"]}
    culprit = ops[loc["culprits"][0]]
    assert culprit["op_type"] == "SUM" and culprit["outputs"] == ["f/sum_sq"]
    assert ops[loc["first_divergent"]]["op_type"] == "SUM"
    assert culprit["fp16_overflow"] == 1 and "overflow" in culprit["hazards"][0]
    assert ops[3]["input_not_fp16_representable"] is True  # DIV inherits the overflow
    # Independently: with the same seeded inputs the sum of squares is far above 65504.
    x = make_input_sets(ir.load(model), count=1).feeds[0]["x"].astype(np.float64)
    assert np.sum((16 * x) ** 2) > 65504
    node_data = json.loads(explorer.read_text())["main"]["results"]
    shown = node_data["f/sum_sq"]["value"]  # the emulated SUM overflows: an infinite score
    assert shown == "inf" or shown > loc["threshold"]
    assert node_data["f/scale"]["value"] < loc["threshold"]
