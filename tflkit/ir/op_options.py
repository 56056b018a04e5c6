"""What an op is, apart from its place in a graph: its ``OpCode`` and its builtin options
(``OpOptions``, the base of ``graph.Op``), decoded from the loaded file only when read.
"""

from __future__ import annotations

import functools
import numbers
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from tflkit.errors import InvalidModelError
from tflkit.ir import option_tables, schema

_NO_FIELDS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True)
class OpCode:
    """What an op is: a builtin code or a custom code, and its version."""

    builtin_code: int
    custom_code: str | None = None
    version: int = 1

    @functools.cached_property
    def name(self) -> str:
        """``CONV_2D`` for builtins, the custom code for custom and flex ops."""
        if self.builtin_code == schema.BuiltinOperator.CUSTOM:
            return self.custom_code or "CUSTOM"
        return schema.op_name(self.builtin_code)

    @property
    def is_custom(self) -> bool:
        return self.builtin_code == schema.BuiltinOperator.CUSTOM

    @property
    def is_flex(self) -> bool:
        return self.is_custom and (self.custom_code or "").startswith("Flex")

    @classmethod
    def builtin(cls, name: str, version: int = 1) -> OpCode:
        return cls(schema.op_code(name), None, version)

    @classmethod
    def custom(cls, code: str, version: int = 1) -> OpCode:
        return cls(schema.BuiltinOperator.CUSTOM, code, version)


class OpOptions:
    """An op's code and options: object-API options, or a loaded op's option tables decoded
    when first read (from the fields ``graph.Op`` sets)."""

    opcode: OpCode
    options2_type: int
    _options: Any
    _options_type: int | None
    _options2: Any
    #: Unparsed (buffer, options position, options2 position) of a loaded op.
    _lazy_options: tuple[Any, int | None, int | None] | None
    #: ``option_fields`` of the unparsed options, once read.
    _lazy_fields: Mapping[str, Any] | None

    @property
    def type(self) -> str:
        return self.opcode.name

    @property
    def version(self) -> int:
        return self.opcode.version

    @property
    def is_custom(self) -> bool:
        return self.opcode.is_custom

    @property
    def options(self) -> Any:
        """Object-API builtin options (``schema.fb.Conv2DOptionsT``...) or None."""
        if self._lazy_options is not None:
            self._parse_options()
        return self._options

    @options.setter
    def options(self, value: Any) -> None:
        if self._lazy_options is not None:
            self._parse_options()
        self._options = value
        self._options_type = None

    @property
    def options2(self) -> Any:
        """Object-API ``BuiltinOptions2`` (StableHLO and composite ops) or None."""
        if self._lazy_options is not None:
            self._parse_options()
        return self._options2

    @options2.setter
    def options2(self, value: Any) -> None:
        if self._lazy_options is not None:
            self._parse_options()
        self._options2 = value

    @property
    def option_fields(self) -> Mapping[str, Any]:
        """Read-only fields of ``options`` and ``options2`` by attribute name
        (``fusedActivationFunction``...; ``options`` wins a clash, ``options2`` holds the StableHLO
        and composite ones: ``name``, ``decompositionSubgraphIndex``...). A loaded op's untouched
        options are read straight from the file, without the object API."""
        lazy = self._lazy_options
        if lazy is not None:
            if self._lazy_fields is None:
                self._lazy_fields = option_tables.decode_options(
                    *lazy, self._options_type, self.options2_type
                )
            if self._lazy_fields is not None:
                return self._lazy_fields
        options, options2 = self.options, self.options2
        if options is None and options2 is None:
            return _NO_FIELDS
        fields: dict[str, Any] = {}
        for table in (options2, options):
            if table is not None:
                fields.update((k, v) for k, v in vars(table).items() if not k.startswith("_"))
        return MappingProxyType(fields)

    def _parse_options(self) -> None:
        buf, position, position2 = self._lazy_options
        self._lazy_options = self._lazy_fields = None
        try:
            if position is not None:
                table = schema.flatbuffer_table(buf, position)
                self._options = schema.fb.BuiltinOptionsCreator(self._options_type, table)
            if position2 is not None:
                table = schema.flatbuffer_table(buf, position2)
                self._options2 = schema.fb.BuiltinOptions2Creator(self.options2_type, table)
        except (IndexError, ValueError, TypeError, struct.error) as exc:
            raise InvalidModelError(
                f"{self.opcode.name} op has corrupt builtin options ({type(exc).__name__}: {exc})"
            ) from None

    @property
    def options_type(self) -> int:
        """The ``BuiltinOptions`` union tag of ``options`` (0 when there are none)."""
        if self._lazy_options is None and self._options is None:
            return 0
        if self._options_type is None:
            self._options_type = schema.options_type_for(self.options)
        return self._options_type

    @property
    def referenced_subgraphs(self) -> dict[str, int]:
        """Subgraph indices named by control-flow options (IF, WHILE, CALL_ONCE, composites)."""
        if not option_tables.may_name_subgraphs(self.options_type, self.options2_type):
            return {}
        fields = self.option_fields
        found: dict[str, int] = {}
        for attr in option_tables.SUBGRAPH_FIELDS:
            value = fields.get(attr)
            if isinstance(value, numbers.Integral):
                found[attr] = int(value)
        return found
