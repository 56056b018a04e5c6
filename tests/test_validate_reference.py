"""A ``.tflite`` reference that names, types or quantizes its inputs and outputs unlike the model
it checks: mltk ships each keyword model as int8 (``serving_default_input_1:0``, int8, no
signature) and as a float32 twin (``input_1``, float32, signature ``serving_default``)."""

from __future__ import annotations

import numpy as np
import pytest

from tflkit.cli.main import main
from tflkit.delegates.reference_io import Port, convert, match_ports
from tflkit.validation.pipeline import ValidateOptions, validate

INT8 = "mltk/keyword_spotting_alexa"
FLOAT = "mltk/keyword_spotting_alexa.float32"


def test_int8_model_against_its_float_twin(world_models):
    report = validate(
        world_models[INT8],
        ValidateOptions(
            runners=["cpu"],
            reference=world_models[FLOAT],
            num_inputs=2,
            localize=True,
            localize_runner="reference",
        ),
    )
    reference = report.runner("reference")
    assert reference.ok, reference.error
    assert any("serving_default_input_1:0 -> input_1 dequantized" in n for n in reference.notes)
    (out,) = report.pair("cpu:reference").outputs
    assert out.tolerance.precision == "int8"  # another grid: the quantization contract
    assert out.verdict == "pass" and out.steps is not None and out.steps <= 2
    # the twin's tensors have other names: op-by-op localization says so, it does not crash
    loc = report.localization
    assert loc is not None and loc.unavailable is not None and "same-named" in loc.unavailable


@pytest.mark.parametrize("name", ["mltk/keyword_spotting_alexa", "mltk/autoencoder_example"])
def test_float_model_against_the_int8_model_it_replaces(world_models, name):
    """The reference's quantization error is the contract, not fp32's, and its noise counts. The
    float autoencoder says nothing about its input range; its int8 twin's input grid does: the
    inputs are drawn there, not from [0, 1], which the twin's grid maps coarsely (0.036 off
    where the int8 bound is 0.031)."""
    report = validate(
        world_models[f"{name}.float32"],
        ValidateOptions(runners=["cpu"], reference=world_models[name], num_inputs=2),
    )
    (out,) = report.pair("cpu:reference").outputs
    assert out.tolerance.precision == "int8"
    assert out.verdict == "pass", out.reasons
    assert out.metrics is not None and out.metrics.max_abs > 0
    assert any(
        "quantized reference" in w for w in report.sensitivity["int8"][out.name]["witnesses"]
    )


def test_a_reference_whose_inputs_cannot_be_matched_is_a_usage_error(world_models, capsys):
    code = main(
        [
            "validate",
            str(world_models[INT8]),
            "--runner",
            "cpu",
            "--reference",
            str(world_models["mltk/audio_example1"]),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot match the model's inputs" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_values_keep_their_real_numbers_across_grids():
    int8 = Port("q", np.dtype(np.int8), (4,), (0.5, -3))
    other = Port("r", np.dtype(np.uint8), (4,), (0.25, 10))
    real = Port("f", np.dtype(np.float32), (4,))
    q = np.array([-128, -3, 0, 127], np.int8)
    assert convert(q, int8, real).tolist() == [-62.5, 0.0, 1.5, 65.0]
    assert convert(convert(q, int8, real), real, int8).tolist() == q.tolist()
    # requantized onto a finer grid, clipped where it ends
    assert convert(q, int8, other).tolist() == [0, 10, 16, 255]
    assert convert(q, int8, int8) is not q and convert(q, int8, int8).tolist() == q.tolist()


def test_ports_match_by_name_then_position_then_shape():
    a = [Port("x", np.dtype(np.float32), (1, 3)), Port("y", np.dtype(np.float32), (1, 5))]
    renamed = [Port("u", np.dtype(np.float32), (-1, 3)), Port("v", np.dtype(np.float32), (1, 5))]
    assert {k: v.name for k, v in match_ports(a, list(reversed(a))).items()} == {"x": "x", "y": "y"}
    assert {k: v.name for k, v in match_ports(a, renamed).items()} == {"x": "u", "y": "v"}
    swapped = list(reversed(renamed))
    assert {k: v.name for k, v in match_ports(a, swapped).items()} == {"x": "u", "y": "v"}
    with pytest.raises(ValueError, match="by name, position or shape"):
        match_ports(a, [Port("z", np.dtype(np.float32), (1, 7))])
