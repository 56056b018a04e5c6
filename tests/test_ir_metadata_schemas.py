"""The metadata schemas' declarative tables: slots in declaration order, union codes from 1."""

from __future__ import annotations

import flatbuffers
import pytest

from tflkit.ir import metadata_schemas as m
from tflkit.validation.samples import input_metadata


def test_slots_follow_the_declaration_order() -> None:
    # the slots tflite_support's metadata_schema.fbs and MLTK's dictionary.fbs give these fields
    assert m.ModelMetadata.subgraph_metadata == 3
    assert m.SubGraphMetadata.input_tensor_metadata == 2
    tensor = m.TensorMetadata
    assert (tensor.content, tensor.process_units, tensor.stats) == (3, 4, 5)
    assert (m.ProcessUnit.options_type, m.ProcessUnit.options) == (0, 1)
    assert (m.Stats.max, m.Stats.min, m.NormalizationOptions.std) == (0, 1, 1)
    assert m.ProcessUnitOptions.NormalizationOptions == 1
    assert m.ContentProperties.name_of(4) == "AudioProperties"
    assert (m.Dictionary.entries, m.Entry.value_type, m.Entry.value) == (1, 1, 2)
    assert m.Value.f64 == 11 and m.Value.name_of(0) is None
    with pytest.raises(AttributeError, match="TensorMetadata has no 'shape'"):
        _ = m.TensorMetadata.shape


def _floats(b: flatbuffers.Builder, values: list[float]) -> int:
    b.StartVector(4, len(values), 4)
    for v in reversed(values):
        b.PrependFloat32(v)
    return b.EndVector()


def _tables(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for o in reversed(offsets):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def test_input_metadata_reads_what_the_named_slots_wrote() -> None:
    b = flatbuffers.Builder(256)
    mean, std = _floats(b, [127.5, 127.5, 127.5]), _floats(b, [127.5])
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(m.NormalizationOptions.mean, mean, 0)
    b.PrependUOffsetTRelativeSlot(m.NormalizationOptions.std, std, 0)
    options = b.EndObject()
    b.StartObject(2)
    b.PrependUint8Slot(m.ProcessUnit.options_type, m.ProcessUnitOptions.NormalizationOptions, 0)
    b.PrependUOffsetTRelativeSlot(m.ProcessUnit.options, options, 0)
    units = _tables(b, [b.EndObject()])
    high, low = _floats(b, [1.0, 2.0]), _floats(b, [-1.0])
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(m.Stats.max, high, 0)
    b.PrependUOffsetTRelativeSlot(m.Stats.min, low, 0)
    stats = b.EndObject()
    b.StartObject(3)
    b.PrependUint8Slot(m.Content.content_properties_type, m.ContentProperties.ImageProperties, 0)
    content = b.EndObject()
    b.StartObject(7)
    b.PrependUOffsetTRelativeSlot(m.TensorMetadata.content, content, 0)
    b.PrependUOffsetTRelativeSlot(m.TensorMetadata.process_units, units, 0)
    b.PrependUOffsetTRelativeSlot(m.TensorMetadata.stats, stats, 0)
    tensors = _tables(b, [b.EndObject()])
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(m.SubGraphMetadata.input_tensor_metadata, tensors, 0)
    subgraphs = _tables(b, [b.EndObject()])
    b.StartObject(8)
    b.PrependUOffsetTRelativeSlot(m.ModelMetadata.subgraph_metadata, subgraphs, 0)
    b.Finish(b.EndObject())
    (meta, missing) = input_metadata(bytes(b.Output()), 2)
    assert meta.mean == (127.5, 127.5, 127.5) and meta.std == (127.5,)
    assert (meta.value_min, meta.value_max, meta.content) == (-1.0, 2.0, "image")
    assert missing.mean is None and missing.content is None
    assert input_metadata(b"\x01\x02", 1)[0].mean is None  # unreadable says nothing
