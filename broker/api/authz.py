"""Applies the ACL checks of ``broker.security.acl_checks`` around the request handlers
(see ``broker.api.authz_base`` for how a check denies a request or part of it)."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from broker.api.authz_base import (
    Amend,
    Body,
    Denied,
    Pending,
    RequestAuth,
    error_body,
    filter_topics,
    host_of,
    principal_of,
)
from broker.api.authz_special import SPECIAL
from broker.api.broker_registration import FORWARDABLE
from broker.api.context import Broker, Handler, HandlerResult, Request
from broker.controller.forwarding import FORWARD_CLIENT_ID
from broker.security.acl_authority import AclAuthority
from broker.security.acl_checks import CHECKS, Check, Cluster, Named, Special, Topics
from broker.security.authorizer import Operation
from pyspark_log.wire.errors import ErrorCode


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
        pending = Pending(request, [])
        applied: Sequence[Check] = checks
        if (
            api_key in FORWARDABLE
            and request.header.client_id == FORWARD_CLIENT_ID
            and broker.listener_policy.is_controller(ctx.listener)
        ):
            applied = (Cluster(Operation.CLUSTER_ACTION),)  # the forwarding broker authorized the client
        try:
            for check in applied:
                _apply(check, auth, pending, broker)
        except Denied as denied:
            return denied.body
        result = handler(broker, pending.request)
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


def _apply(check: Check, auth: RequestAuth, pending: Pending, broker: Broker) -> None:
    header = pending.request.header
    if isinstance(check, Cluster):
        if not auth.cluster(check.operation):
            raise Denied(error_body(header.api_key, header.api_version, pending.body,
                                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED))  # fmt: skip
    elif isinstance(check, Named):
        name = pending.body.get(check.field)
        if name is not None and not auth.allowed(check.operation, check.resource_type, name):
            raise Denied(error_body(header.api_key, header.api_version, pending.body, check.code))
    elif isinstance(check, Topics):
        filter_topics(pending, auth, check.shape, check.code, lambda name: auth.topic(check.operation, name))
    elif isinstance(check, Special):
        SPECIAL[check.name](auth, pending, broker)
    else:  # pragma: no cover - the table holds only these kinds
        raise TypeError(check)
