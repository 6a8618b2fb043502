"""Bridge between our messages and kafka-python 3.x's protocol classes (test helper).

kafka-python ships its own implementation of Kafka's message schemas (``kafka.protocol.*``,
generated from Kafka 4.x JSON at runtime); encoding with one implementation and decoding with
the other proves the field layouts. kafka-python renames the ``*_authorized_operations`` fields
of a few responses to ``authorized_operations`` with a bitfield type: those are not compared.
Our declarations call Kafka's ``Values`` of DescribeClientQuotas ``quota_values`` (a field name
may not shadow a dict method): ``RENAMED`` maps kafka-python's name to ours.
"""

from __future__ import annotations

from typing import Any

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer  # noqa: F401 -- registers the request/response classes
from kafka.protocol.api_message import ApiMessage

from pyspark_log.wire.message import to_plain
from pyspark_log.wire.types import ZERO_UUID

SKIPPED_NAMES = {"authorized_operations", "cluster_authorized_operations", "topic_authorized_operations"}
RENAMED = {"values": "quota_values"}


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


def kp_classes() -> dict[tuple[int, str], type]:
    """kafka-python's primary message classes by (api_key, "request" | "response")."""
    found = {}
    for cls in _subclasses(ApiMessage):
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None):
            found[(cls.API_KEY, cls.type)] = cls
    return found


def kp_versions(cls: type) -> tuple[int, int]:
    """The versions kafka-python's bundled schema really describes (its JSON's validVersions)."""
    return cls._valid_versions


def to_kp(kp_struct: Any, value: dict[str, Any], version: int, data_class: Any) -> Any:
    """Build a kafka-python object of ``data_class`` from one of our bodies."""
    kwargs = {}
    for name, field in kp_struct.fields.items():
        ours = RENAMED.get(name, name)
        if name in SKIPPED_NAMES or ours not in value or not field.for_version_q(version):
            continue
        v = value[ours]
        if field.is_struct_array():
            v = None if v is None else [to_kp(field, item, version, field.data_class) for item in v]
        elif field.is_struct():
            v = to_kp(field, v, version, field.data_class)
        kwargs[name] = v
    return data_class(version=version, **kwargs)


def from_kp(kp_struct: Any, obj: Any, version: int) -> dict[str, Any]:
    """The fields of a decoded kafka-python object present in ``version``, as plain values."""
    out = {}
    for name, field in kp_struct.fields.items():
        if name in SKIPPED_NAMES or not field.for_version_q(version):
            continue
        v = getattr(obj, name)
        if field.is_struct() and not field.is_struct_array() and v is None:
            continue  # an absent tagged struct: kafka-python leaves it None, we give its default
        if field.is_struct_array():
            v = None if v is None else [from_kp(field, item, version) for item in v]
        elif field.is_struct():
            v = from_kp(field, v, version)
        elif isinstance(v, bytearray | memoryview):
            v = bytes(v)
        elif v is None and field.type_str == "uuid":
            v = ZERO_UUID  # kafka-python reads the all-zero uuid as None
        out[RENAMED.get(name, name)] = v
    return out


def restrict(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Our decoded body reduced to the keys kafka-python reported, recursively."""
    out = {}
    for k, v in theirs.items():
        mine = ours.get(k)
        if isinstance(v, dict) and isinstance(mine, dict):
            out[k] = restrict(mine, v)
        elif isinstance(v, list) and isinstance(mine, list) and all(isinstance(x, dict) for x in v):
            out[k] = [restrict(m, t) for m, t in zip(mine, v, strict=False)] if len(mine) == len(v) else mine
        else:
            out[k] = to_plain(mine)
    return out
