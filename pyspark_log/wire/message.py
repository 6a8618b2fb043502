"""``Message``: the value type of every decoded request and response (and of their nested structs).

A ``Message`` is a ``dict`` whose keys are the declared field names in snake_case, readable as
attributes too: ``req.topics[0].partitions[0].records`` and ``req["topics"]`` are the same thing.
A decoded message holds every field the schema declares, present in the decoded version or not
(absent ones carry their declared defaults), so handler code never has to test the version.

Encoders accept any ``Mapping`` tree (plain dicts included) and fill absent keys from the schema's
defaults, so handlers build responses as literals::

    {"throttle_time_ms": 0, "responses": [{"name": "t", "partition_responses": [...]}]}

No declared field name may shadow a ``dict`` method; ``schema.py`` checks this at import time.

Pickling (Spark ships messages to executors) is the ``dict`` subclass's own: no ``__dict__``
(``__slots__ = ()``), the items are the state, and ``__getattr__`` answers a missing name with
``AttributeError`` as pickle and copy expect. The one custom pickling in ``wire`` is
``KafkaError.__reduce__`` (errors.py), which rebuilds errors whose ``__init__`` signatures differ.
"""

from __future__ import annotations

from typing import Any


class Message(dict[str, Any]):
    """A dict with attribute access; equality, copying and pickling are the dict's."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        return f"Message({dict.__repr__(self)})"


def to_plain(value: Any) -> Any:
    """``value`` with every Message turned into a plain dict and every memoryview into bytes
    (for comparisons, JSON dumps and logs)."""
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    if isinstance(value, memoryview):
        return value.tobytes()
    return value
