"""The schema model: fields, version ranges, request/response schemas and APIs.

This is the in-memory form of a declaration (``dsl.py`` parses our compact text form into it;
docs/architecture.md ("declare wire schemas once")). Its semantics follow Kafka's message-schema conventions
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
cached, so a hot-path call costs one list index plus the generated function. The field model
(``Versions``, ``Field``, the declaration checks) lives in ``fields.py``, below both this module
and ``codegen.py``; it is re-exported here.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark_log.wire.codegen import compile_decoder, compile_encoder, generate_decoder, generate_encoder
from pyspark_log.wire.errors import DecodeError, EncodeError, UnsupportedVersionError
from pyspark_log.wire.fields import (
    ALL_VERSIONS,
    MAX_VERSION,
    PRIMITIVES,
    Decoder,
    Encoder,
    Field,
    Versions,
    check_fields,
    struct_default,
)
from pyspark_log.wire.message import Message

__all__ = ["ALL_VERSIONS", "MAX_VERSION", "PRIMITIVES", "Api", "Field", "Schema", "Versions"]


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
            enc = self._encoders[version] = compile_encoder(
                self.name, self.fields, version, flexible=version in self.flexible
            )
        return enc

    def decoder(self, version: int) -> Decoder:
        """The generated decoder for ``version`` (compiled on first use, then cached)."""
        self._check(version)
        dec = self._decoders[version]
        if dec is None:
            dec = self._decoders[version] = compile_decoder(
                self.name, self.fields, version, flexible=version in self.flexible
            )
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
        flexible = version in self.flexible
        encoder = generate_encoder(self.name, self.fields, version, flexible=flexible)[0]
        return encoder + "\n" + generate_decoder(self.name, self.fields, version, flexible=flexible)[0]


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
