"""The flatbuffer schemas tflkit reads inside a model's metadata buffers, as declarative tables.

Neither generated module ships with LiteRT, so each table lists its fields in the schema's
declaration order and a field's vtable slot is its index: the rule :mod:`tflkit.ir._tables`
reads the model itself by. A union field takes two slots, ``X_type`` then ``X``, as flatc lays
them out; a union's members are numbered from 1 in declaration order (0 is NONE). Read a buffer
with the IR's reader::

    root = metadata_root(data)  # ModelMetadata
    for sub in root.children(ModelMetadata.subgraph_metadata): ...
"""

from __future__ import annotations

from tflkit.ir._tables import Fields

__all__ = [
    "Content",
    "ContentProperties",
    "Dictionary",
    "Entry",
    "Fields",
    "ModelMetadata",
    "NormalizationOptions",
    "ProcessUnit",
    "ProcessUnitOptions",
    "ScalarValue",
    "Stats",
    "SubGraphMetadata",
    "TensorMetadata",
    "Value",
    "metadata_root",
]


class Names:
    """Names -> numbers in declaration order: a table's fields -> vtable slots (from 0), a
    union's members -> type codes (from 1). ``TensorMetadata.stats`` is 5."""

    def __init__(self, name: str, *names: str, start: int = 0) -> None:
        self._name = name
        self._numbers = {n: i for i, n in enumerate(names, start)}
        self._names = {i: n for n, i in self._numbers.items()}

    def __getattr__(self, name: str) -> int:
        try:
            return self.__dict__["_numbers"][name]
        except KeyError:
            raise AttributeError(f"{self.__dict__.get('_name')} has no {name!r}") from None

    def name_of(self, number: int) -> str | None:
        """The field or member with this number (None when unknown)."""
        return self._names.get(number)


def _table(name: str, fields: str) -> Names:
    """A table's fields, in schema order, separated by white space."""
    return Names(name, *fields.split())


def _union(name: str, members: str) -> Names:
    """A union's members, in schema order (type 1 first), separated by white space."""
    return Names(name, *members.split(), start=1)


def metadata_root(data: bytes) -> Fields:
    """The root table of a metadata buffer."""
    return Fields.root(data)


# TFLite metadata: the ``TFLITE_METADATA`` buffer (tflite_support ``metadata_schema.fbs``, file
# identifier M001; root ModelMetadata).
ModelMetadata = _table(
    "ModelMetadata",
    "name description version subgraph_metadata author license associated_files min_parser_version",
)
SubGraphMetadata = _table(
    "SubGraphMetadata",
    "name description input_tensor_metadata output_tensor_metadata associated_files "
    "input_process_units output_process_units input_tensor_groups output_tensor_groups "
    "custom_metadata",
)
TensorMetadata = _table(
    "TensorMetadata",
    "name description dimension_names content process_units stats associated_files",
)
Content = _table("Content", "content_properties_type content_properties range")
ContentProperties = _union(
    "ContentProperties",
    "FeatureProperties ImageProperties BoundingBoxProperties AudioProperties",
)
ProcessUnit = _table("ProcessUnit", "options_type options")
ProcessUnitOptions = _union(
    "ProcessUnitOptions",
    "NormalizationOptions ScoreCalibrationOptions ScoreThresholdingOptions "
    "BertTokenizerOptions SentencePieceTokenizerOptions RegexTokenizerOptions",
)
NormalizationOptions = _table("NormalizationOptions", "mean std")
Stats = _table("Stats", "max min")

# MLTK's parameter dictionary: the ``SL_PARAMSv1`` buffer (Silicon Labs MLTK ``dictionary.fbs``;
# root Dictionary).
Dictionary = _table("Dictionary", "schema_version entries")
Entry = _table("Entry", "key value_type value")
Value = _union(
    "Value",
    "boolean i8 u8 i16 u16 i32 u32 i64 u64 f32 f64 str str_list int32_list float_list bin",
)
#: BoolValue, Int8Value ... DoubleValue: the one-field tables of the scalar members of Value
ScalarValue = _table("ScalarValue", "value")
