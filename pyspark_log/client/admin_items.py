"""Per-item answers of admin requests: which errors end an item, which retry the call.

An admin response answers each topic (resource, user, ...) separately. ``item_errors`` collects
the errors that are answers; NOT_CONTROLLER and the like (``ITEM_RETRIABLE``) are raised so that
``AsyncAdmin._retrying`` sends the whole call again.

Topic mutations under a KIP-599 controller mutation quota are retried item by item instead
(``settle_throttled``): the topics created before the quota ran out are done, and only those
answered THROTTLING_QUOTA_EXCEEDED are sent again once the response's throttle time has passed,
as the Java admin's default ``retryOnQuotaViolation`` does (re-sending every topic would make
the created ones fail with TOPIC_ALREADY_EXISTS).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pyspark_log.client.errors import error_for
from pyspark_log.wire import ErrorCode, KafkaError, Message

# Per-item errors worth retrying the whole call for; others (UNKNOWN_TOPIC_OR_PARTITION on a
# delete, say) are answers, not transient states.
ITEM_RETRIABLE = frozenset(
    {ErrorCode.NOT_CONTROLLER, ErrorCode.THROTTLING_QUOTA_EXCEEDED, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
)


def raise_errors(errors: dict[Any, KafkaError]) -> None:
    """Raise the first error, carrying all of them as ``errors``; nothing if there are none."""
    if errors:
        first = next(iter(errors.values()))
        first.errors = errors  # type: ignore[attr-defined]
        raise first


def item_results(items: Iterable[Any], name_of: Callable[[Any], Any], what: str) -> list[tuple[Any, KafkaError | None]]:
    """(item, its error or None); NOT_CONTROLLER and the like are raised to retry the whole call
    (THROTTLING_QUOTA_EXCEEDED is returned: the caller decides)."""
    out: list[tuple[Any, KafkaError | None]] = []
    for item in items:
        if item.error_code == ErrorCode.NONE:
            out.append((item, None))
            continue
        exc = error_for(item.error_code, getattr(item, "error_message", None), context=f"{what} {name_of(item)}")
        if exc.code in ITEM_RETRIABLE and exc.code != ErrorCode.THROTTLING_QUOTA_EXCEEDED:
            raise exc
        out.append((item, exc))
    return out


def item_errors(items: Iterable[Any], name_of: Callable[[Any], Any], what: str) -> dict[Any, KafkaError]:
    """Per-item errors; NOT_CONTROLLER and the like are raised to retry the whole call."""
    errors: dict[Any, KafkaError] = {}
    for item, exc in item_results(items, name_of, what):
        if exc is not None:
            if exc.code in ITEM_RETRIABLE:
                raise exc
            errors[name_of(item)] = exc
    return errors


def settle_throttled(
    resp: Message, items: Iterable[Any], name_of: Callable[[Any], Any], what: str,
    *, pending: dict[Any, Any], done: dict[Any, KafkaError],
) -> None:  # fmt: skip
    """Every item answered other than THROTTLING_QUOTA_EXCEEDED leaves ``pending`` (its error, if
    any, goes into ``done``). If some were throttled, raise that error with the response's
    ``throttle_time_ms`` attached, so the caller retries just the ``pending`` ones after it."""
    throttled: KafkaError | None = None
    for item, exc in item_results(items, name_of, what):
        if exc is not None and exc.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED:
            throttled = exc
            continue
        pending.pop(name_of(item), None)
        if exc is not None:
            done[name_of(item)] = exc
    if throttled is not None:
        throttled.throttle_time_ms = int(resp.get("throttle_time_ms") or 0)  # type: ignore[attr-defined]
        raise throttled
