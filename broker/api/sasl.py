"""SaslHandshake (17) and SaslAuthenticate (36) on SASL listeners (KIP-43, KIP-152).

The connection's ``SaslSession`` (``broker.security.sasl.session``, created by the dispatcher on
a SASL_PLAINTEXT or SASL_SSL listener) owns the state; these handlers turn its answers into
Kafka's responses:

- SaslHandshake: NONE and the enabled mechanisms, or UNSUPPORTED_SASL_MECHANISM (the client
  may try another); on a listener without SASL, or a second handshake, ILLEGAL_SASL_STATE.
- SaslAuthenticate: the mechanism's answer token; when it refuses, SASL_AUTHENTICATION_FAILED
  with its message, and the connection is closed after the response (as Kafka does). The broker
  logs who failed (the user name the client gave), from where and on which listener — never
  the password. Success sets the connection's principal (``User:<name>``); v1+ carries
  ``session_lifetime_ms`` (``connections.max.reauth.ms``, KIP-368; the session module closes
  expired connections and serves re-authentication).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Request
from broker.security.sasl.errors import SaslFailure
from broker.security.sasl.session import IllegalSaslState, SaslSession
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)

CLOSE_AFTER_RESPONSE = "close_after_response"  # a connection attribute the dispatcher reads


def _session(request: Request) -> SaslSession | None:
    session = request.connection.attributes.get("sasl")
    return session if isinstance(session, SaslSession) else None


def handle_sasl_handshake(broker: Broker, request: Request) -> Mapping[str, Any]:
    del broker
    session = _session(request)
    if session is None:  # not a SASL listener
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    enabled = list(session.config.mechanisms)
    try:
        accepted = session.handshake(str(request.body.mechanism), raw_tokens=request.version == 0)
    except IllegalSaslState:
        request.connection.attributes[CLOSE_AFTER_RESPONSE] = True
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": enabled}
    if not accepted:
        return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}
    return {"error_code": ErrorCode.NONE, "mechanisms": enabled}


def _failure(code: int, message: str) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "auth_bytes": b"", "session_lifetime_ms": 0}


def handle_sasl_authenticate(broker: Broker, request: Request) -> Mapping[str, Any]:
    del broker
    ctx = request.connection
    session = _session(request)
    if session is None or session.raw_tokens:
        ctx.attributes[CLOSE_AFTER_RESPONSE] = True
        return _failure(ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate without a SaslHandshake v1 on a SASL listener")
    try:
        answer = authenticate(session, bytes(request.body.auth_bytes), ctx.peer, ctx.listener)
    except IllegalSaslState as exc:
        ctx.attributes[CLOSE_AFTER_RESPONSE] = True
        return _failure(ErrorCode.ILLEGAL_SASL_STATE, str(exc))
    except SaslFailure as exc:
        ctx.attributes[CLOSE_AFTER_RESPONSE] = True
        return _failure(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc))
    if session.principal is not None:
        ctx.attributes["principal"] = session.principal
    lifetime = session.session_lifetime_ms  # KIP-368: the client re-authenticates before it ends
    return {"error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": answer, "session_lifetime_ms": lifetime}


def authenticate(session: SaslSession, token: bytes, peer: str, listener: str) -> bytes:
    """One token through the session, with the log lines Kafka's operators expect."""
    try:
        answer = session.authenticate(token)
    except SaslFailure as exc:
        log.warning(
            "SASL %s authentication of user %r from %s on listener %s failed: %s",
            session.mechanism, session.user, peer, listener, exc,
        )  # fmt: skip
        raise
    if session.principal is not None:
        log.info(
            "SASL %s: %s authenticated from %s on listener %s", session.mechanism, session.principal, peer, listener
        )
    return answer
