"""The field model of a schema declaration: version ranges, fields, their defaults and checks.

Below ``schema.py`` (which puts fields together into request/response schemas with cached codecs)
and ``codegen.py`` (which generates the codecs from the fields), so both import it and ``schema``
imports ``codegen``, never the other way. Semantics are described in ``schema.py``.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark_log.wire.message import Message
from pyspark_log.wire.types import ZERO_UUID

MAX_VERSION = 0x7FFF
PRIMITIVES = frozenset(
    {"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool", "uuid", "string", "bytes", "records"}
)
NULLABLE_TYPES = frozenset({"string", "bytes", "records"})
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_DICT_ATTRS = frozenset(dir(dict)) | {"to_plain"}


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; empty when ``lo > hi`` ("none")."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str) -> Versions:
        """``"3+"``, ``"0-2"``, ``"5"`` or ``"none"`` (Kafka's notation)."""
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        lo, sep, hi = text.partition("-")
        return cls(int(lo), int(hi) if sep else int(lo))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return f"{self.lo}" if self.lo == self.hi else f"{self.lo}-{self.hi}"


NO_VERSIONS = Versions(1, 0)
ALL_VERSIONS = Versions(0, MAX_VERSION)


@dataclass(frozen=True, slots=True)
class Field:
    """One declared field. ``type`` is a primitive name or ``"struct"`` (then ``fields`` is set);
    ``array`` makes it an array of that type."""

    name: str
    type: str
    versions: Versions = ALL_VERSIONS
    array: bool = False
    nullable: Versions = NO_VERSIONS
    tag: int | None = None
    default: Any = None
    has_default: bool = False
    fields: tuple[Field, ...] = ()

    def present(self, version: int) -> bool:
        return self.versions.lo <= version <= self.versions.hi

    def nullable_in(self, version: int) -> bool:
        return self.nullable.lo <= version <= self.nullable.hi

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and self.present(version)

    @property
    def is_struct(self) -> bool:
        return self.type == "struct"

    def default_value(self, version: int) -> Any:
        """A fresh default for this field as decoded at ``version``."""
        if self.has_default and (self.default is None or not (self.array or self.is_struct)):
            return self.default
        if self.array:
            return []
        if self.is_struct:
            return struct_default(self.fields, version)
        return _TYPE_DEFAULTS[self.type]


_TYPE_DEFAULTS: dict[str, Any] = {
    "int8": 0, "int16": 0, "int32": 0, "int64": 0, "uint16": 0, "uint32": 0, "float64": 0.0,
    "bool": False, "uuid": ZERO_UUID, "string": "", "bytes": b"", "records": None,
}  # fmt: skip


def struct_default(fields: tuple[Field, ...], version: int) -> Message:
    """A Message holding the default of every field of a struct."""
    return Message({f.name: f.default_value(version) for f in fields})


def check_fields(fields: tuple[Field, ...], where: str, flexible: Versions) -> None:
    """Declaration checks run once at import: names, tags, nullability and types."""
    names: set[str] = set()
    tags: set[int] = set()
    for f in fields:
        at = f"{where}.{f.name}"
        if not _NAME.match(f.name) or keyword.iskeyword(f.name) or f.name in _DICT_ATTRS:
            raise ValueError(f"{at}: field names are snake_case identifiers that do not shadow dict")
        if f.name in names:
            raise ValueError(f"{at}: duplicate field")
        names.add(f.name)
        if f.type != "struct" and f.type not in PRIMITIVES:
            raise ValueError(f"{at}: unknown type {f.type!r}")
        if f.is_struct != bool(f.fields):
            raise ValueError(f"{at}: structs, and only structs, have nested fields")
        if not f.nullable.empty and not (f.array or f.type in NULLABLE_TYPES or f.is_struct):
            raise ValueError(f"{at}: only strings, bytes, records, arrays and structs can be nullable")
        if f.tag is not None:
            if f.tag in tags:
                raise ValueError(f"{at}: duplicate tag {f.tag}")
            tags.add(f.tag)
            if f.versions.lo < flexible.lo or f.versions.empty:
                raise ValueError(f"{at}: tagged fields need flexible versions")
        if f.has_default and f.default is None and f.nullable.empty:
            raise ValueError(f"{at}: default null on a non-nullable field")
        if f.fields:
            check_fields(f.fields, at, flexible)


Encoder = Callable[[Mapping[str, Any], list[Any]], None]
Decoder = Callable[[memoryview, int], tuple[Message, int]]
