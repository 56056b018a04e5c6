"""tflkit.validation.inputs and the runners that need no GPU: ranges per dtype, files, images,
shapes, reference files, the external delegate runner's failures. Real LiteRT on the CPU."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from tflkit import ir
from tflkit.delegates.base import execute
from tflkit.delegates.external import ExternalDelegateRunner
from tflkit.delegates.litert_cpu import LiteRTCpuRunner
from tflkit.delegates.tf_reference import ReferenceRunner, load_reference, save_reference
from tflkit.errors import UsageError
from tflkit.ir.builder import OpBuilder
from tflkit.ir.shapes import parse_input_shapes
from tflkit.validation.inputs import make_input_sets
from tflkit.validation.pipeline import ValidateOptions, validate

fb = ir.schema.fb


def _gather_model(name: str = "ids") -> ir.Model:
    """params (10, 4) constant, indices int32 (1, 6) input -> GATHER -> (1, 6, 4)."""
    model = ir.Model(description="gather")
    graph = model.add_subgraph("main")
    ids = graph.new_tensor(name, (1, 6), np.int32)
    x = graph.new_tensor("signal_normalized", (1, 4), np.float32)
    b = OpBuilder(graph, prefix="g")
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    rows = b.GATHER(table, ids, options=fb.GatherOptionsT(), shape=(1, 6, 4), dtype=np.float32)
    y = b.ADD(rows, x, options=fb.AddOptionsT(), shape=(1, 6, 4))
    graph.inputs, graph.outputs = [ids, x], [y]
    model.signatures.append(
        ir.SignatureDef("serving_default", graph, {name: ids, "x": x}, {"y": y})
    )
    return model


def test_ranges_follow_the_model(corpus):
    float_sets = make_input_sets(ir.load(corpus.path("conv_dense")), count=8, seed=3)
    x = np.stack([f[next(iter(f))] for f in float_sets.feeds])
    assert x.dtype == np.float32 and x.min() >= 0.0 and x.max() <= 1.0 and x.min() < 0.01

    int8 = make_input_sets(ir.load(corpus.path("full_int8")), count=8)
    q = np.stack([f[next(iter(f))] for f in int8.feeds])
    assert q.dtype == np.int8 and q.min() == -128 and q.max() == 127

    uint8 = make_input_sets(ir.load(corpus.path("full_uint8_io")), count=8)
    u = np.stack([f[next(iter(f))] for f in uint8.feeds])
    assert u.dtype == np.uint8 and u.min() == 0 and u.max() == 255

    gather = make_input_sets(_gather_model(), count=20, seed=1)
    ids = np.stack([f["ids"] for f in gather.feeds])
    assert ids.min() == 0 and ids.max() == 9  # valid rows of the (10, 4) table
    signal = np.stack([f["x"] for f in gather.feeds])
    assert signal.min() < -0.5 and signal.max() > 0.5  # [-1, 1] from the tensor name
    assert gather.ranges == {"ids": (0, 9), "x": (-1.0, 1.0)}


def test_same_seed_same_inputs(corpus):
    model = ir.load(corpus.path("conv_dense"))
    a = make_input_sets(model, count=2, seed=5).feeds
    b = make_input_sets(model, count=2, seed=5).feeds
    c = make_input_sets(model, count=2, seed=6).feeds
    name = next(iter(a[0]))
    assert np.array_equal(a[1][name], b[1][name]) and not np.array_equal(a[1][name], c[1][name])


def test_npy_npz_and_leading_set_axis(tmp_path):
    model = _gather_model()
    ids = np.random.default_rng(0).integers(0, 10, (3, 1, 6)).astype(np.int32)
    x = np.zeros((3, 1, 4), np.float32)
    np.savez(tmp_path / "in.npz", ids=ids, x=x)
    sets = make_input_sets(model, source=tmp_path / "in.npz")
    assert len(sets.feeds) == 3 and np.array_equal(sets.feeds[2]["ids"], ids[2])
    np.savez(tmp_path / "one.npz", ids=ids[0], x=x[0])
    assert len(make_input_sets(model, source=tmp_path / "one.npz").feeds) == 1
    np.save(tmp_path / "single.npy", ids)
    with pytest.raises(UsageError, match="takes 2 inputs"):
        make_input_sets(model, source=tmp_path / "single.npy")
    np.savez(tmp_path / "bad.npz", ids=ids, x=np.zeros((3, 2, 4), np.float32))
    with pytest.raises(UsageError, match="has shape"):
        make_input_sets(model, source=tmp_path / "bad.npz")
    with pytest.raises(UsageError, match="do not exist"):
        make_input_sets(model, source=tmp_path / "missing.npz")


def test_image_folder_is_resized_to_the_input(tmp_path, corpus):
    from PIL import Image as image  # part of the test extra: never skipped

    folder = tmp_path / "images"
    folder.mkdir()
    for i, colour in enumerate([(255, 0, 0), (0, 0, 255)]):
        image.new("RGB", (40, 30), colour).save(folder / f"{i}.png")
    sets = make_input_sets(ir.load(corpus.path("conv_dense")), source=folder)
    arrays = [f[next(iter(f))] for f in sets.feeds]
    assert len(arrays) == 2 and arrays[0].shape == (1, 16, 16, 3)
    assert np.allclose(arrays[0][..., 0], 1.0) and np.allclose(arrays[0][..., 2], 0.0)
    assert np.allclose(arrays[1][..., 2], 1.0)


def test_input_shape_sets_dynamic_dims(corpus):
    model = ir.load(corpus.path("dynamic_batch"))
    name = next(iter(model.signatures[0].inputs))
    sets = make_input_sets(model, count=1, shapes={name: (3, 8)})
    assert sets.feeds[0][name].shape == (3, 8)
    default = make_input_sets(model, count=1)
    assert default.feeds[0][name].shape == (1, 8) and "dynamic" in default.notes[0]
    with pytest.raises(UsageError, match="does not fit"):
        make_input_sets(model, shapes={name: (3, 9)})
    assert parse_input_shapes(["a=1,2"]) == {"a": (1, 2)}
    with pytest.raises(UsageError):
        parse_input_shapes(["a:1,2"])
    report = validate(
        corpus.path("dynamic_batch"),
        ValidateOptions(runners=["cpu", "cpu-ref"], num_inputs=2, input_shapes={name: (3, 8)}),
    )
    assert report.verdict == "pass"
    out = report.runner("cpu").outputs[0]
    assert next(iter(out.values())).shape[0] == 3


def test_cpu_runners_agree_with_an_independent_interpreter(corpus):
    from ai_edge_litert.interpreter import Interpreter

    data = corpus.path("conv_dense").read_bytes()
    sets = make_input_sets(ir.load(data), count=3)
    result = execute(LiteRTCpuRunner(data), sets.feeds)
    assert result.ok and len(result.infer_seconds) == 3 and result.compile_seconds > 0
    runner = Interpreter(model_content=data).get_signature_runner()
    for feed, out in zip(sets.feeds, result.outputs, strict=True):
        mine = runner(**feed)
        assert set(mine) == set(out)
        for key in out:
            assert np.array_equal(mine[key], out[key])


def test_reference_file_round_trip_and_failures(tmp_path):
    feeds = [{"x": np.arange(4, dtype=np.float32)}]
    outs = [{"y": np.ones((1, 2), np.float32)}]
    path = save_reference(tmp_path / "ref.npz", feeds, outs, source="m.keras", framework="keras 3")
    recorded = load_reference(path)
    assert recorded.manifest["format"] == "tflkit.reference/1" and recorded.manifest["sets"] == 1
    assert np.array_equal(recorded.feeds[0]["x"], feeds[0]["x"])
    runner = ReferenceRunner(path, outputs={"y": (1, 2)})
    assert execute(runner, feeds).outputs[0]["y"].shape == (1, 2)
    other = [{"x": np.zeros(4, np.float32)}]
    assert execute(runner, other).status == "run_error"
    missing = execute(ReferenceRunner(tmp_path / "nope.keras", outputs={}), feeds)
    assert missing.status == "unavailable" and "does not exist" in missing.error
    np.savez(tmp_path / "plain.npz", x=np.zeros(3))
    with pytest.raises(UsageError, match="not a tflkit reference file"):
        load_reference(tmp_path / "plain.npz")


def test_external_delegate_failures_are_reported(tmp_path, corpus):
    data = corpus.path("conv_dense").read_bytes()
    feeds = make_input_sets(ir.load(data), count=1).feeds
    missing = execute(ExternalDelegateRunner(data, tmp_path / "none.so"), feeds)
    assert missing.status == "unavailable" and "does not exist" in missing.error
    # A real shared library that is not a TFLite delegate: load_delegate must fail cleanly.
    # numpy's compiled core is one on every machine that runs these tests.
    import numpy._core._multiarray_umath as core

    lib = core.__file__
    result = execute(ExternalDelegateRunner(data, lib, timeout=120), feeds)
    assert result.status == "unavailable", (result.status, result.error, sys.platform)
    assert "load_delegate failed" in result.error


def test_cli_json_and_exit_codes(corpus, capsys):
    from tflkit.cli.main import main

    model = str(corpus.path("conv_dense"))
    assert main(["validate", model, "-r", "cpu", "-r", "cpu-ref", "-n", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == "tflkit.validate/1" and report["verdict"] == "pass"
    (pair,) = report["comparisons"]
    assert pair["pair"] == "cpu-ref:cpu" and pair["outputs"][0]["metrics"]["top1"] == 1.0
    assert main(["validate", model, "-r", "cpu", "--pair", "gpu-fp16:cpu"]) == 2
    assert "not among the runners" in capsys.readouterr().err
    assert main(["validate", model, "-r", "tpu"]) == 2
    assert main(["validate", model + ".missing"]) == 2
    assert main(["validate", model, "-r", "cpu", "--tolerance", "rtol=x"]) == 2


def _cast_gather_model() -> ir.Model:
    """ids int64 (1, 8) -> CAST int32 -> GATHER into a (1000, 4) table: an embedding lookup."""
    model = ir.Model(description="cast gather")
    graph = model.add_subgraph("main")
    ids = graph.new_tensor("ids", (1, 8), np.int64)
    b = OpBuilder(graph, prefix="e")
    options = fb.CastOptionsT()
    options.inDataType = ir.schema.tensor_type(np.int64)
    options.outDataType = ir.schema.tensor_type(np.int32)
    cast = b.CAST(ids, options=options, shape=(1, 8), dtype=np.int32)
    table = np.arange(4000, dtype=np.float32).reshape(1000, 4)
    rows = b.GATHER(table, cast, options=fb.GatherOptionsT(), shape=(1, 8, 4), dtype=np.float32)
    graph.inputs, graph.outputs = [ids], [rows]
    return model


def test_realistic_inputs_photos_metadata_audio_and_indices(world_models):
    # a float image model with normalization options in its metadata: (pixel - 127.5) / 127.5
    deeplab = make_input_sets(
        ir.load(world_models["simple-cv/deeplabv3"]), count=2, kind="realistic"
    )
    (name,) = deeplab.kinds
    x = deeplab.feeds[0][name]
    assert deeplab.kinds[name] == "photo" and deeplab.source == "realistic"
    assert x.min() >= -1.0 and x.max() <= 1.0 and x.min() < -0.9 and x.max() > 0.9
    assert any("metadata normalization" in n for n in deeplab.notes)
    # a photograph, not noise: neighbouring pixels are strongly correlated
    row = x[0, :, :, 0]
    assert np.corrcoef(row[:, :-1].ravel(), row[:, 1:].ravel())[0, 1] > 0.8
    assert not np.array_equal(deeplab.feeds[0][name], deeplab.feeds[1][name])
    # a uint8 model takes raw pixels
    effnet = make_input_sets(
        ir.load(world_models["simple-cv/efficientnet_lite0"]), count=1, kind="realistic"
    )
    pixels = next(iter(effnet.feeds[0].values()))
    assert pixels.dtype == np.uint8 and pixels.max() > 200 and pixels.min() < 30
    # a waveform input of dynamic length gets one second of speech-like audio
    mel = make_input_sets(
        ir.load(world_models["openwakeword/melspectrogram"]), count=1, kind="realistic"
    )
    wave = next(iter(mel.feeds[0].values()))
    assert mel.source == "realistic" and wave.shape == (1, 16000)
    assert 0.4 < np.abs(wave).max() <= 0.5 and abs(float(wave.mean())) < 0.05
    # an integer input that reaches a GATHER through a CAST indexes the whole 1,000-row table
    ids = make_input_sets(_cast_gather_model(), count=50, kind="realistic")
    values = np.stack([f["ids"] for f in ids.feeds])
    assert ids.kinds == {"ids": "index"} and values.max() > 900 and values.min() >= 0
    # random stays available, and the report says which data each input got
    random = make_input_sets(_gather_model(), count=1, kind="random")
    assert random.kinds == {"ids": "random", "x": "random"}
    assert random.to_json()["inputs"][0]["data"] == "random"


def _relu_model(name: str, shape: tuple[int, ...]) -> ir.Model:
    """One float input of ``shape`` named ``name`` -> RELU."""
    model = ir.Model(description="relu")
    graph = model.add_subgraph("main")
    x = graph.new_tensor(name, shape, np.float32)
    y = OpBuilder(graph, prefix="r").RELU(x, shape=shape)
    graph.inputs, graph.outputs = [x], [y]
    return model


def test_realistic_spectrogram_inputs(world_models):
    # mltk's keyword model: its SL_PARAMSv1 metadata describes the front end (49 channels, 20 ms)
    kws = make_input_sets(
        ir.load(world_models["mltk/keyword_spotting_mobilenetv2"]), count=2, kind="realistic"
    )
    (name,) = kws.kinds
    x = kws.feeds[0][name]
    assert kws.kinds[name] == "spectrogram" and kws.source == "realistic"
    assert x.shape == (1, 59, 49, 1) and x.dtype == np.int8
    assert x.min() == -128 and x.max() == 127  # the top 90 dB over the int8 range
    assert any("SL_PARAMSv1 metadata" in n and "20 ms step" in n for n in kws.notes)
    # a spectrogram, not noise: neighbouring frames and channels are strongly correlated
    s = x[0, :, :, 0].astype(np.float64)
    assert np.corrcoef(s[:-1].ravel(), s[1:].ravel())[0, 1] > 0.5
    assert np.corrcoef(s[:, :-1].ravel(), s[:, 1:].ravel())[0, 1] > 0.5
    assert not np.array_equal(kws.feeds[0][name], kws.feeds[1][name])
    # no metadata: a name that says log-mel gets the default front end; the same shape
    # without that evidence stays an image
    mel = make_input_sets(_relu_model("log_mel", (1, 98, 40, 1)), count=1, kind="realistic")
    assert mel.kinds == {"log_mel": "spectrogram"}
    features = mel.feeds[0]["log_mel"]
    assert 0.0 <= features.min() < 0.5 and features.max() == 1.0  # [0, 1]: a float input
    image = make_input_sets(_relu_model("input", (1, 98, 40, 1)), count=1, kind="realistic")
    assert image.kinds == {"input": "photo"}
