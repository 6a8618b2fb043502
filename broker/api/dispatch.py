"""Turns request frames into responses: header decode, version check, handler, response encode.

Contract (implements ``broker.network.connection.RequestHandler``):
- a frame whose header or body cannot be decoded, an unknown API key, or an unsupported version
  closes the connection (as Kafka does), except ApiVersions, which is answered with
  UNSUPPORTED_VERSION and our ranges so the client can retry lower (KIP-511);
- ApiVersions lists exactly the APIs this broker has handlers for, at the ranges of the Kafka
  release in ``pyspark_log.wire.versions``;
- a handler's synchronous part runs in request order; its awaitable part may overlap others;
- a handler that raises an unexpected exception closes that connection only; the broker and
  every other connection go on;
- a controller-only request (Raft RPCs, broker registration and heartbeats, AlterPartition,
  forwarded requests, Fetch of the metadata log) on a listener that is not the controller
  listener closes the connection (``broker.security.listeners``);
- with a ``QuotaEnforcer``, a client request's response goes through it (usage recorded,
  ``throttle_time_ms`` set, the connection muted: ``broker.api.quota_enforcement``);
- with ``BrokerStats``, each request gets a ``RequestTiming`` (carried on its ``Response`` to the
  connection, which finishes it once written) and its response body is counted before encoding
  (``broker.metrics.requests``: RequestMetrics, BrokerTopicMetrics, the request log).
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Mapping
from typing import Any

from broker.api.context import Broker, Handler, Request
from broker.api.quota_enforcement import QuotaEnforcer
from broker.api.sasl import CLOSE_AFTER_RESPONSE
from broker.api.sasl import authenticate as sasl_authenticate
from broker.controller.forwarding import FORWARD_CLIENT_ID
from broker.log.file_slice import FileSlice
from broker.metrics import requests as request_metrics
from broker.metrics.instruments import BrokerStats, RequestTiming
from broker.network.connection import CloseConnection, ConnectionContext, HandlerResult
from broker.network.response import FileRegion, Response
from broker.raft.rpc import FETCH_DIRECTORY_VERSION, is_metadata_fetch
from broker.security.sasl.errors import SaslFailure
from broker.security.sasl.scram import ScramCredential
from broker.security.sasl.session import IllegalSaslState, SaslSession
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import DecodeError, ErrorCode, KafkaError, UnsupportedVersionError
from pyspark_log.wire.headers import (
    RequestHeader,
    decode_request,
    decode_request_header,
    encode_response,
    encode_response_parts,
)
from pyspark_log.wire.registry import get_api
from pyspark_log.wire.schema import Field
from pyspark_log.wire.versions import SUPPORTED_VERSIONS

log = logging.getLogger(__name__)


class Dispatcher:
    """Routes decoded requests to the handlers registered for their API keys."""

    def __init__(
        self, broker: Broker, handlers: Mapping[int, Handler], quotas: QuotaEnforcer | None = None,
        stats: BrokerStats | None = None,
    ) -> None:  # fmt: skip
        self._broker = broker
        self.stats = stats
        self._quotas = quotas
        self._handlers = dict(handlers)
        self.advertised: dict[int, tuple[int, int]] = {
            key: SUPPORTED_VERSIONS[key] for key in sorted(self._handlers) if key in SUPPORTED_VERSIONS
        }
        broker.api_versions = self.api_versions_entries()

    def api_versions_entries(self) -> list[dict[str, int]]:
        return [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in self.advertised.items()]

    def handle(self, frame: bytes | bytearray, ctx: ConnectionContext) -> HandlerResult:
        """``frame``: one request without its size prefix (a bytearray for large frames, which
        the transport receives in place; it is not modified afterwards, so records stay views)."""
        buf = memoryview(frame) if isinstance(frame, bytearray) else frame
        policy = self._broker.listener_policy
        sasl: SaslSession | None = None
        if policy.sasl:
            sasl = self._sasl_session(ctx)
            if sasl is not None and sasl.raw_tokens and sasl.state == "AUTHENTICATE":
                return self._raw_sasl_token(bytes(buf), ctx, sasl)  # after a SaslHandshake v0
        try:
            header, body = decode_request(buf)
        except UnsupportedVersionError as exc:
            return self._unsupported(buf, exc)
        except (DecodeError, KafkaError) as exc:
            raise CloseConnection(f"undecodable request: {exc}") from exc
        handler = self._handlers.get(header.api_key)
        lo_hi = self.advertised.get(header.api_key)
        if handler is None or lo_hi is None:
            raise CloseConnection(f"api key {header.api_key} is not served by this broker")
        if not lo_hi[0] <= header.api_version <= lo_hi[1] and not _raft_fetch_v17(
            header.api_key, header.api_version, body
        ):
            raise CloseConnection(f"api {header.api_key} version {header.api_version} is not supported")
        if sasl is not None and not sasl.allows(header.api_key):
            when = (
                "after its SASL session expired (connections.max.reauth.ms)"
                if sasl.expired()
                else "before SASL authentication"
            )
            log.warning(
                "closing connection %s from %s: %s %s on listener %s",
                ctx.connection_id, ctx.peer, ApiKey(header.api_key).name, when, ctx.listener,
            )  # fmt: skip
            raise CloseConnection(f"api {header.api_key} {when}")
        if not policy.is_controller(ctx.listener):
            refused = policy.refusal(
                ctx.listener,
                header.api_key,
                forwarded=header.client_id == FORWARD_CLIENT_ID,
                metadata_fetch=header.api_key == ApiKey.FETCH and is_metadata_fetch(header.api_version, body),
            )
            if refused is not None:
                log.warning("closing connection %s from %s: %s", ctx.connection_id, ctx.peer, refused)
                raise CloseConnection(refused)
        request = Request(header, body, ctx)
        quotas = self._quotas if self._quotas is not None and self._quotas.applies(header, body) else None
        started = time.perf_counter()
        stats = self.stats
        timing: RequestTiming | None = None
        if stats is not None:
            timing = RequestTiming(
                request_metrics.api_name(header.api_key), header.api_version, header.correlation_id,
                header.client_id or "", ctx.listener, str(ctx.attributes.get("principal", "User:ANONYMOUS")),
                ctx.received or started, started,
            )  # fmt: skip
            if header.api_key == ApiKey.FETCH:
                timing.alias = "FetchFollower" if request_metrics.is_follower_fetch(body) else "FetchConsumer"
        if quotas is not None:
            quotas.before(header, body, ctx)
        try:
            result = handler(self._broker, request)
        except CloseConnection:
            raise
        except Exception as exc:
            log.exception("handler for api %s v%s failed", header.api_key, header.api_version)
            raise CloseConnection(f"internal error: {exc}") from exc
        if result is None:
            if quotas is not None:
                quotas.mute_without_response(header, ctx, len(frame))
            if stats is not None and timing is not None:
                request_metrics.observe_no_response(stats, header.api_key, body)
                timing.local_s = time.perf_counter() - started
                request_metrics.finish(stats, timing, None, 0)
            return None
        if not isinstance(result, dict) and inspect.isawaitable(result):  # dict first: the common case
            return self._finish(
                header, result, ctx, quotas=quotas, request_bytes=len(frame), sync_spent=time.perf_counter() - started,
                request_body=body, timing=timing,
            )  # fmt: skip
        encode = _to_response if timing is None else functools.partial(self._encode_counted, body, timing)
        if ctx.attributes.pop(CLOSE_AFTER_RESPONSE, False):  # a refused SASL login: answer, then close
            response = encode(header, result)
            response.close_after = True
            return response
        if quotas is not None:
            return quotas.finish(
                header,
                ctx,
                result,
                request_bytes=len(frame),
                started=started,
                encode=functools.partial(encode, header),
            )
        return encode(header, result)

    def _encode_counted(
        self, request_body: Mapping[str, Any], timing: RequestTiming, header: RequestHeader, body: Mapping[str, Any]
    ) -> Response:
        """``_to_response``, after counting what ``body`` says (``broker.metrics.requests``); the
        response carries ``timing`` to the connection, which finishes it once written."""
        assert self.stats is not None
        request_metrics.observe_response(self.stats, timing, header.api_key, request_body, body)
        response = _to_response(header, body)
        now = time.perf_counter()
        timing.local_s = now - timing.started - timing.remote_s
        timing.ready = now
        response.timing = timing
        return response

    def _sasl_session(self, ctx: ConnectionContext) -> SaslSession | None:
        """The connection's SASL state on a SASL listener (created with its first request)."""
        session = ctx.attributes.get("sasl")
        if isinstance(session, SaslSession):
            return session
        config = self._broker.listener_policy.sasl.get(ctx.listener)
        if config is None:
            return None
        broker = self._broker

        def scram(user: str, mechanism: str) -> ScramCredential | None:
            return broker.image().scram.get((user, mechanism))

        session = ctx.attributes["sasl"] = SaslSession(config, scram)
        return session

    def _raw_sasl_token(self, token: bytes, ctx: ConnectionContext, session: SaslSession) -> Response:
        """SaslHandshake v0: the frame is a bare token and so is the answer; a refused login
        closes the connection (v0 has no error response)."""
        try:
            answer = sasl_authenticate(session, token, ctx.peer, ctx.listener)
        except (SaslFailure, IllegalSaslState) as exc:
            raise CloseConnection(f"SASL authentication failed: {exc}") from None
        if session.principal is not None:
            ctx.attributes["principal"] = session.principal
        return Response([answer])

    def _unsupported(self, frame: bytes | memoryview, exc: UnsupportedVersionError) -> Response:
        try:
            header, _ = decode_request_header(frame)
        except (DecodeError, KafkaError) as inner:
            raise CloseConnection(f"undecodable request header: {inner}") from inner
        if header.api_key == ApiKey.API_VERSIONS:
            # KIP-511: a v0 body listing the APIs this broker serves, so the client retries lower.
            body = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": self.api_versions_entries()}
            return Response([encode_response(ApiKey.API_VERSIONS, 0, header.correlation_id, body)[4:]])
        raise CloseConnection(str(exc))

    async def _finish(
        self, header: RequestHeader, pending: Awaitable[Mapping[str, Any] | None], ctx: ConnectionContext,
        *, quotas: QuotaEnforcer | None, request_bytes: int, sync_spent: float,
        request_body: Mapping[str, Any] | None = None, timing: RequestTiming | None = None,
    ) -> Response | None:  # fmt: skip
        """The response of a handler that waited. Its quota usage counts the synchronous part
        (``sync_spent`` seconds) and the encoding, not the wait (the loop served others meanwhile)."""
        try:
            body = await pending
        except CloseConnection:
            raise
        except Exception as exc:
            log.exception("handler for api %s v%s failed", header.api_key, header.api_version)
            raise CloseConnection(f"internal error: {exc}") from exc
        encode = _to_response
        if timing is not None and request_body is not None:
            # the wait: from the handler's call to now, less its own synchronous part
            timing.remote_s = time.perf_counter() - timing.started - sync_spent
            timing.local_s = sync_spent
            encode = functools.partial(self._encode_counted, request_body, timing)
        if body is None:
            if timing is not None and self.stats is not None:
                request_metrics.finish(self.stats, timing, None, 0)
            return None
        if quotas is not None:
            resumed = time.perf_counter() - sync_spent
            return quotas.finish(
                header,
                ctx,
                body,
                request_bytes=request_bytes,
                started=resumed,
                encode=functools.partial(encode, header),
            )
        return encode(header, body)


def _to_response(header: RequestHeader, body: Mapping[str, Any]) -> Response:
    """The encoded body in as few parts as possible: one bytes, unless the response carries
    records (Fetch), whose file slices stay file regions between joined runs of encoded chunks
    (the transport sends them with sendfile)."""
    parts = encode_response_parts(header.api_key, header.api_version, header.correlation_id, body)
    if not _carries_records(header.api_key):
        return Response([b"".join(parts[1:])])  # parts[0] is the size prefix; the transport writes its own
    out: list[Any] = []
    run: list[Any] = []
    for part in parts[1:]:
        if isinstance(part, FileSlice):
            if part.size:
                if run:
                    out.append(b"".join(run))
                    run = []
                out.append(FileRegion(part, part.position, part.size))
        else:
            run.append(part)
    if run:
        out.append(b"".join(run))
    return Response(out)


@functools.cache
def _carries_records(api_key: int) -> bool:
    """Whether the response schema of ``api_key`` has a records field (file slices may appear)."""

    def walk(fields: tuple[Field, ...]) -> bool:
        return any(f.type == "records" or walk(f.fields) for f in fields)

    return walk(get_api(api_key).response.fields)


def _raft_fetch_v17(api_key: int, version: int, body: Any) -> bool:
    """KIP-853: replicas of a dynamic quorum fetch the metadata log with Fetch v17 (it carries their
    directory id), a version ApiVersions does not advertise to clients (Kafka 3.7's range)."""
    return api_key == ApiKey.FETCH and version == FETCH_DIRECTORY_VERSION and is_metadata_fetch(version, body)
