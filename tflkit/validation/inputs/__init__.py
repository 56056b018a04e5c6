"""Input sets for running a model: realistic or seeded random data, files, or a folder of images.

Every runner gets the same input sets. A feed maps the entry point's input names (signature
names, or tensor names for a model without signatures) to arrays.

``kind="realistic"`` gives each input the most plausible data we have
(:mod:`tflkit.validation.samples`):
photographs for image-shaped inputs (normalised with the model's metadata when it has
normalization options, else mapped onto the input's value range), a speech-like signal for
audio-shaped inputs, log-mel spectrograms of it for spectrogram inputs
(:mod:`tflkit.validation.spectrogram`: the model's audio front-end metadata, or a name that says
so), valid
indices for integer inputs that index a table; everything else falls
back to random data, and :attr:`InputSets.kinds` says what each input got.

Random data follows what the model says about each input: floats in [0, 1] (images), [-1, 1]
when the name says so, the metadata's value range, or the float range a following QUANTIZE op
can represent; the full range of int8/uint8 for quantized inputs; valid indices for inputs used
(directly or through CAST/RESHAPE) as GATHER / EMBEDDING_LOOKUP / ONE_HOT indices.

Modules: :mod:`~tflkit.validation.inputs.sets` (:func:`make_input_sets`, :class:`InputSets`),
:mod:`~tflkit.validation.inputs.specs` (concrete shapes, metadata),
:mod:`~tflkit.validation.inputs.ranges` (value and real ranges, quantization grids),
:mod:`~tflkit.validation.inputs.realistic` (photos, audio, spectrograms, indices),
:mod:`~tflkit.validation.inputs.files` (.npy/.npz files, image folders). Random values and the
integer rule: :mod:`tflkit.ir.feeds`.
"""

from tflkit.validation.inputs.files import IMAGE_SUFFIXES, image_batches
from tflkit.validation.inputs.ranges import (
    input_real_ranges,
    is_quantized,
    quantize_step,
    real_range,
    value_range,
)
from tflkit.validation.inputs.sets import KINDS, InputSets, make_input_sets

__all__ = [
    "IMAGE_SUFFIXES",
    "KINDS",
    "InputSets",
    "image_batches",
    "input_real_ranges",
    "is_quantized",
    "make_input_sets",
    "quantize_step",
    "real_range",
    "value_range",
]
