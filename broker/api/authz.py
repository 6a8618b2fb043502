"""Applies the ACL checks of ``broker.security.acl`` around the request handlers.

``authorized_handlers(handlers, authority)`` wraps every handler whose API has checks
(``broker.security.acl.checks.CHECKS``). A wrapped handler computes, before the real one runs,
who asks (``RequestAuth``: the connection's principal — ``User:<name>`` after SASL, the
certificate's ``User:CN=…`` with mTLS, ``User:ANONYMOUS`` otherwise, as Kafka — and its host)
and applies the API's checks (``broker.security.acl.rules.apply``): a refused request is answered
without running the handler; otherwise the handler runs on what the checks left of the request
and the denied items are put back into its response (waited for or not).

Forwarded requests (a broker relays an admin request to the active controller, on the
controller listener) need CLUSTER_ACTION instead: the forwarding broker authorized the client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from broker.api.broker_registration import FORWARDABLE
from broker.api.context import Broker, Handler, HandlerResult, Request
from broker.api.fetch import follower_id
from broker.api.produce import has_transactional_batch
from broker.api.topics import auto_create_enabled
from broker.controller.forwarding import FORWARD_CLIENT_ID
from broker.network.connection import ConnectionContext
from broker.security.acl import rules
from broker.security.acl.authority import AclAuthority
from broker.security.acl.binding import Operation
from broker.security.acl.checks import CHECKS, Check, Cluster
from broker.security.acl.request import Amend, Body, Denied, Pending, RequestAuth

ANONYMOUS = "User:ANONYMOUS"


def principal_of(ctx: ConnectionContext) -> str:
    principal = ctx.attributes.get("principal")
    return principal if isinstance(principal, str) and principal else ANONYMOUS


def host_of(ctx: ConnectionContext) -> str:
    return ctx.peer.rsplit(":", 1)[0].strip("[]")


@dataclass(frozen=True)
class _BrokerFacts:
    """``broker.security.acl.request.BrokerFacts`` answered by this broker and its API handlers."""

    broker: Broker

    def serves_metadata_quorum(self) -> bool:
        return self.broker.raft is not None

    def auto_creates_topics(self) -> bool:
        return auto_create_enabled(self.broker)

    def fetching_replica(self, version: int, body: Any) -> int:
        return follower_id(version, body)

    def has_transactional_batch(self, body: Any) -> bool:
        return has_transactional_batch(body)


def authorized_handlers(handlers: Mapping[int, Handler], authority: AclAuthority) -> dict[int, Handler]:
    return {key: _wrap(key, handler, authority) for key, handler in handlers.items()}


def _wrap(api_key: int, handler: Handler, authority: AclAuthority) -> Handler:
    checks = CHECKS.get(api_key, ())
    if not checks:
        return handler

    def wrapped(broker: Broker, request: Request) -> HandlerResult:
        image = broker.image()
        ctx = request.connection
        auth = RequestAuth(principal_of(ctx), host_of(ctx), authority.authorizer(image), image)
        pending = Pending(request.header, request.body, [])
        applied: Sequence[Check] = checks
        if (
            api_key in FORWARDABLE
            and request.header.client_id == FORWARD_CLIENT_ID
            and broker.listener_policy.is_controller(ctx.listener)
        ):
            applied = (Cluster(Operation.CLUSTER_ACTION),)  # the forwarding broker authorized the client
        try:
            rules.apply(applied, auth, pending, _BrokerFacts(broker))
        except Denied as denied:
            return denied.body
        if pending.body is not request.body:
            request = Request(request.header, pending.body, request.connection)
        result = handler(broker, request)
        if not pending.amends or result is None:
            return result
        if isinstance(result, Mapping):
            return _amend(result, pending.amends)
        return _amend_later(result, pending.amends)

    return wrapped


def _amend(body: Mapping[str, Any], amends: list[Amend]) -> Body:
    out = dict(body)
    for amend in amends:
        out = amend(out)
    return out


async def _amend_later(result: Awaitable[Mapping[str, Any] | None], amends: list[Amend]) -> Body | None:
    body = await result
    return None if body is None else _amend(body, amends)
