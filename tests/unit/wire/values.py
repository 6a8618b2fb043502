"""Random message bodies for any declared schema and version (test helper, not a test module).

``random_body(fields, version, rnd)`` returns ``(body, expected)``: ``body`` also carries junk in
fields absent from ``version`` (encoders must ignore it); ``expected`` is what decoding the
encoded body must give (absent fields at their defaults, records as bytes).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from pyspark_log.wire.schema import Field

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}
_STRINGS = ["", "a", "topic-1", "ünïcödé ☃", "x" * 130, "__consumer_offsets"]


def _int(rnd: random.Random, kind: str) -> int:
    lo, hi = _INT_RANGES[kind]
    return (
        rnd.choice([0, -1, 1, lo, hi, rnd.randint(lo, hi)]) if lo < 0 else rnd.choice([0, 1, hi, rnd.randint(lo, hi)])
    )


def _scalar(rnd: random.Random, f: Field, version: int) -> Any:
    if f.nullable_in(version) and rnd.random() < 0.25:
        return None
    kind = f.type
    if kind in _INT_RANGES:
        return _int(rnd, kind)
    if kind == "float64":
        return rnd.uniform(-1e9, 1e9)
    if kind == "bool":
        return rnd.random() < 0.5
    if kind == "uuid":
        return uuid.UUID(int=0) if rnd.random() < 0.2 else uuid.UUID(int=rnd.getrandbits(128))
    if kind == "string":
        return rnd.choice(_STRINGS)
    if kind in ("bytes", "records"):
        return rnd.randbytes(rnd.choice([0, 1, 7, 200]))
    raise AssertionError(kind)


def _value(rnd: random.Random, f: Field, version: int, depth: int) -> tuple[Any, Any]:
    if f.array:
        if f.nullable_in(version) and rnd.random() < 0.25:
            return None, None
        n = rnd.randint(0, 3 if depth < 2 else 2)
        elem = Field(f.name, f.type, fields=f.fields)
        pairs = [_value(rnd, elem, version, depth + 1) for _ in range(n)]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    if f.is_struct:
        return random_body(f.fields, version, rnd, depth + 1)
    value = _scalar(rnd, f, version)
    expected = bytes(value) if f.type == "records" and value is not None else value
    return value, expected


def random_body(fields: tuple[Field, ...], version: int, rnd: random.Random, depth: int = 0) -> tuple[dict, dict]:
    body: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    for f in fields:
        if f.present(version):
            if f.tag is not None and rnd.random() < 0.3:
                continue  # absent tagged field: decodes to its default
            body[f.name], expected[f.name] = _value(rnd, f, version, depth)
        else:
            expected[f.name] = f.default_value(version)
            if not f.is_struct and not f.array and f.type in _INT_RANGES:
                body[f.name] = 7  # junk the encoder must ignore in this version
    for f in fields:
        if f.name not in expected:
            expected[f.name] = f.default_value(version)
    return body, expected
