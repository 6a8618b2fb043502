"""Client quota enforcement on the request path (Kafka documentation §4.9 "Quotas" Enforcement, KIP-219).

the broker computes the delay that brings a violating client back under its quota and answers at once with
that delay (a fetch answer carries no data), then mutes the client's channel and reads no more of its requests
until the delay is over.

For every request of a client (not a replica, controller or broker-lifecycle request) the
``Dispatcher`` hands the handler's body to ``QuotaEnforcer.finish``, which:

1. records the usage of the connection's quota group — Produce: the request's size
   (``producer_byte_rate``); Fetch: the response's size (``consumer_byte_rate``); every request:
   the event-loop time spent on it, handler plus encoding, as a percentage of one second
   (``request_percentage``);
2. takes the largest throttle time owed. A throttled Fetch is answered with no data and its bytes
   are not counted (Kafka's ``unrecordQuotaSensor``);
3. puts ``throttle_time_ms`` in the response, which is sent at once — the largest of the
   above and the handler's own (a KIP-599 controller mutation quota, ``mutation_quota``);
4. mutes the connection for that long: ``ConnectionContext.muted_until``; the connection reads no
   further request before then (broker-side back-pressure even for clients that ignore the field).

A Fetch's ``max_bytes`` is first capped at the most the quota lets through after a quiet period,
``quota.window.num - 1`` windows of it (Kafka's ``getMaxValueInQuotaWindow``): a larger response
would be throttled, and so answered empty, even then, and the consumer would stall until its
measured window had widened.
The user is the connection's authenticated principal, ``ctx.attributes["principal"]`` (``User:name``,
set by a SASL login or a TLS client certificate), and ``ANONYMOUS`` without one (``_principal``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.api.fetch import follower_id
from broker.controller.forwarding import FORWARD_CLIENT_ID, REGISTRATION_CLIENT_ID
from broker.network.connection import ConnectionContext
from broker.network.response import Response
from broker.quota.entity import ANONYMOUS, QuotaMatch
from broker.quota.manager import ClientQuotas
from broker.quota.mutation import STRICT_SINCE, MutationQuota
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.headers import RequestHeader
from pyspark_log.wire.message import Message
from pyspark_log.wire.versions import KRAFT_CONTROLLER_APIS

# Requests between cluster members, never throttled (Kafka records them as exempt).
EXEMPT_APIS = KRAFT_CONTROLLER_APIS | {ApiKey.WRITE_TXN_MARKERS, ApiKey.API_VERSIONS}
INT32_MAX = 2**31 - 1
_INTERNAL_CLIENT_IDS = frozenset({FORWARD_CLIENT_ID, REGISTRATION_CLIENT_ID})


class QuotaEnforcer:
    """Records usage and decides throttling for client requests; see the module docstring."""

    def __init__(self, quotas: ClientQuotas, clock_ms: Callable[[], int]) -> None:
        self.quotas = quotas
        self._clock_ms = clock_ms

    def applies(self, header: RequestHeader, body: Message) -> bool:
        if header.api_key in EXEMPT_APIS or (header.client_id or "") in _INTERNAL_CLIENT_IDS:
            return False
        return not (header.api_key == ApiKey.FETCH and follower_id(header.api_version, body) >= 0)

    def before(self, header: RequestHeader, body: Message, ctx: ConnectionContext) -> None:
        """Cap a consumer Fetch's ``max_bytes`` at ``quota.window.num - 1`` windows of its group's quota."""
        if header.api_key != ApiKey.FETCH or header.api_version < 3:
            return
        cap = self.quotas.fetch.max_value_in_window(self._match_fetch(header, ctx))
        if cap is not None and body["max_bytes"] > cap:
            body["max_bytes"] = max(1, int(cap))

    def finish(
        self,
        header: RequestHeader,
        ctx: ConnectionContext,
        body: Mapping[str, Any],
        *,
        request_bytes: int,
        started: float,
        encode: Callable[[Mapping[str, Any]], Response],
    ) -> Response:
        """The response to send (with ``throttle_time_ms``), after recording and muting."""
        response = encode(body)
        now_ms = self._clock_ms()
        user, client_id = _principal(ctx), header.client_id or ""
        table = self.quotas.table()
        throttle_ms = 0 if header.api_key == ApiKey.FETCH else int(body.get("throttle_time_ms") or 0)  # KIP-599's
        if header.api_key == ApiKey.PRODUCE:
            match = self.quotas.produce.match(table, user, client_id)
            throttle_ms = max(throttle_ms, self.quotas.produce.record(match, request_bytes, now_ms))
        fetch_match: QuotaMatch | None = None
        fetch_bytes = 0
        if header.api_key == ApiKey.FETCH:
            fetch_match = self.quotas.fetch.match(table, user, client_id)
            fetch_bytes = response.size
            throttle_ms = self.quotas.fetch.record(fetch_match, fetch_bytes, now_ms)
        request_match = self.quotas.request.match(table, user, client_id)
        spent_percent = (time.perf_counter() - started) * 100  # seconds of the loop, as % of one second
        throttle_ms = max(throttle_ms, self.quotas.request.record(request_match, spent_percent, now_ms))
        if throttle_ms <= 0:
            return response
        throttle_ms = min(throttle_ms, INT32_MAX)  # the response field is an int32
        ctx.muted_until = max(ctx.muted_until, time.monotonic() + throttle_ms / 1000)
        if fetch_match is not None:
            self.quotas.fetch.unrecord(fetch_match, fetch_bytes, now_ms)
            body = {"throttle_time_ms": throttle_ms, "error_code": 0, "session_id": 0, "responses": []}
        elif body.get("throttle_time_ms") == throttle_ms:
            return response  # the handler's own (KIP-599) throttle time is the largest
        else:
            body = {**body, "throttle_time_ms": throttle_ms}
        return encode(body)

    def mute_without_response(self, header: RequestHeader, ctx: ConnectionContext, request_bytes: int) -> None:
        """acks=0 Produce: no response carries the delay; the channel is muted all the same."""
        if header.api_key != ApiKey.PRODUCE:
            return
        match = self.quotas.produce.match(self.quotas.table(), _principal(ctx), header.client_id or "")
        throttle_ms = self.quotas.produce.record(match, request_bytes, self._clock_ms())
        if throttle_ms > 0:
            ctx.muted_until = max(ctx.muted_until, time.monotonic() + throttle_ms / 1000)

    def _match_fetch(self, header: RequestHeader, ctx: ConnectionContext) -> QuotaMatch:
        return self.quotas.fetch.match(self.quotas.table(), _principal(ctx), header.client_id or "")


def mutation_quota(broker: Broker, request: Request) -> MutationQuota:
    """The KIP-599 ``controller_mutation_rate`` quota of a CreateTopics, CreatePartitions or
    DeleteTopics request (``broker.quota.mutation``): strict for the versions that can carry
    THROTTLING_QUOTA_EXCEEDED, none for requests forwarded between cluster members. The handler
    puts its ``throttle_time_ms`` in the response; ``QuotaEnforcer.finish`` mutes the channel."""
    header = request.header
    strict = header.api_version >= STRICT_SINCE[header.api_key]
    quotas = broker.mutation_quotas
    if quotas is None or (header.client_id or "") in _INTERNAL_CLIENT_IDS:
        return MutationQuota(None, strict)
    table = broker.image().client_quotas
    user, client_id = _principal(request.connection), header.client_id or ""
    return quotas.quota_for(table, user, client_id, strict=strict, now_ms=broker.clock_ms())


def _principal(ctx: ConnectionContext) -> str:
    """The user name of the connection's principal (``ctx.attributes["principal"]``: a
    ``User:name`` string or an object with a ``name``), ``ANONYMOUS`` without one."""
    principal = ctx.attributes.get("principal")
    if isinstance(principal, str):
        return principal.removeprefix("User:")
    name = getattr(principal, "name", None)
    return name if isinstance(name, str) else ANONYMOUS
