"""The schema model: fields, version ranges, request/response schemas and APIs.

This is the in-memory form of a declaration (``dsl.py`` parses our compact text form into it;
DESIGN principle 4). Its semantics follow Kafka's message-schema conventions
(``clients/src/main/resources/common/message/README.md``):

* a field exists in the versions of its ``versions`` range; in other versions it is not on the
  wire, is ignored on encode and decodes to its default;
* ``nullable`` is the range of versions in which the field may be null (strings, bytes, records,
  arrays);
* a ``tag`` makes the field a KIP-482 tagged field in its versions (which must be flexible): it
  is written in the trailing tagged section only when its value differs from the default;
* in flexible versions strings, bytes, records and arrays use their compact forms and every
  struct ends with a tagged-field section;
* defaults: the declared ``default``, else 0 / False / "" / b"" / the zero UUID / [] / a struct of
  defaults; records default to null.

``Schema.encode`` / ``Schema.decode`` run per-version codecs generated once by ``codegen.py`` and
cached, so a hot-path call costs one list index plus the generated function.
"""

from __future__ import annotations

import keyword
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark_log.wire.errors import DecodeError, EncodeError, UnsupportedVersionError
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
        if not f.nullable.empty and not (f.array or f.type in NULLABLE_TYPES):
            raise ValueError(f"{at}: only strings, bytes, records and arrays can be nullable")
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


@dataclass(eq=False)
class Schema:
    """The declared body of one API's requests or responses, with its generated codecs.

    ``encode(body, version) -> bytes``; ``encode_into(body, version, out)`` appends byte chunks
    (and records values as given, e.g. file regions for sendfile) to ``out``;
    ``decode(buf, version) -> Message``.
    """

    name: str
    fields: tuple[Field, ...]
    valid: Versions
    flexible: Versions
    _encoders: list[Encoder | None] = field(default_factory=list, repr=False)
    _decoders: list[Decoder | None] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        check_fields(self.fields, self.name, self.flexible)
        self._encoders = [None] * (self.valid.hi + 1)
        self._decoders = [None] * (self.valid.hi + 1)

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    def _check(self, version: int, api_key: int = -1) -> None:
        if version not in self.valid:
            raise UnsupportedVersionError(api_key, version)

    def encoder(self, version: int) -> Encoder:
        """The generated encoder for ``version`` (compiled on first use, then cached)."""
        self._check(version)
        enc = self._encoders[version]
        if enc is None:
            from pyspark_log.wire.codegen import compile_encoder

            enc = self._encoders[version] = compile_encoder(self, version)
        return enc

    def decoder(self, version: int) -> Decoder:
        """The generated decoder for ``version`` (compiled on first use, then cached)."""
        self._check(version)
        dec = self._decoders[version]
        if dec is None:
            from pyspark_log.wire.codegen import compile_decoder

            dec = self._decoders[version] = compile_decoder(self, version)
        return dec

    def encode_into(self, body: Mapping[str, Any], version: int, out: list[Any]) -> None:
        enc = self._encoders[version] if 0 <= version < len(self._encoders) else None
        if enc is None:
            enc = self.encoder(version)
        try:
            enc(body, out)
        except EncodeError:
            raise
        except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
            raise EncodeError(f"{self.name} v{version}: {exc}") from exc

    def encode(self, body: Mapping[str, Any], version: int) -> bytes:
        out: list[Any] = []
        self.encode_into(body, version, out)
        return b"".join(out)

    def decode_from(self, buf: bytes | bytearray | memoryview, pos: int, version: int) -> tuple[Message, int]:
        """Decode one body starting at ``pos``; returns it and the position after it."""
        dec = self._decoders[version] if 0 <= version < len(self._decoders) else None
        if dec is None:
            dec = self.decoder(version)
        view = buf if isinstance(buf, memoryview) and buf.format == "B" else memoryview(buf).cast("B")
        try:
            return dec(view, pos)
        except DecodeError:
            raise
        except (struct.error, IndexError, ValueError, TypeError) as exc:
            raise DecodeError(f"{self.name} v{version}: {exc}") from exc

    def decode(self, buf: bytes | bytearray | memoryview, version: int) -> Message:
        """Decode a whole body; records fields are zero-copy memoryview slices of ``buf``.
        Bytes after the body are ignored (as Kafka's parsers do)."""
        return self.decode_from(buf, 0, version)[0]

    def default(self, version: int) -> Message:
        """A body of defaults, as decoding an all-default message at ``version`` would give."""
        return struct_default(self.fields, version)

    def source(self, version: int) -> str:
        """The generated Python source of this version's encoder and decoder (for reading)."""
        from pyspark_log.wire.codegen import generate_decoder, generate_encoder

        return generate_encoder(self, version)[0] + "\n" + generate_decoder(self, version)[0]


@dataclass(eq=False)
class Api:
    """One Kafka API: its key, declared version range, flexible versions and both schemas."""

    key: int
    name: str
    valid: Versions
    flexible: Versions
    request: Schema
    response: Schema

    @property
    def min_version(self) -> int:
        return self.valid.lo

    @property
    def max_version(self) -> int:
        return self.valid.hi

    @property
    def first_flexible_version(self) -> int | None:
        """The first flexible version, or None if no declared version is flexible."""
        return None if self.flexible.empty else self.flexible.lo

    def is_flexible(self, version: int) -> bool:
        """Flexible (KIP-482) at ``version``; also answers for versions above our maximum,
        since flexibility never goes away once introduced."""
        return not self.flexible.empty and version >= self.flexible.lo

    def request_header_version(self, version: int) -> int:
        """Request header v2 for flexible versions, v1 otherwise."""
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """Response header v1 for flexible versions, v0 otherwise; ApiVersions always v0
        (KIP-511: a client must read it before it knows what the broker supports)."""
        if self.key == API_VERSIONS_KEY:
            return 0
        return 1 if self.is_flexible(version) else 0


API_VERSIONS_KEY = 18
