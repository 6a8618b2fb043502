"""``metrics.port``: an HTTP endpoint serving ``GET /metrics`` in the Prometheus text format (0.0.4).

It exposes the KIP-595 ``raft-manager`` metrics of the node's ``RaftDriver`` (seed "Metrics")
the replication metrics (``broker.replication.metrics``), the log cleaner's
(``broker.log.cleaner.metrics``) and the per-group client quota metrics (``broker.quota.metrics``),
named as the Prometheus JMX exporter names Kafka's: ``kafka_raft_`` + the metric name with ``-``
turned into ``_`` (``current-leader`` -> ``kafka_raft_current_leader``). ``current-state`` is an
enum: one ``kafka_raft_current_state{state="..."}`` sample per state, 1 for the current one.
A node without ``process.roles`` serves only ``kafka_raft_up 0``.

Deliberately small: HTTP/1.0, one request per connection, request head at most 8 KiB read within
5 s, anything but ``GET /metrics`` (or ``/``) is 404, a request line that is not
``METHOD PATH [VERSION]`` is 400. A head that is too long, too slow, cut short or undecodable
closes the connection without an answer; none of it affects other connections or the broker.
``metrics.port=0`` picks a free port (logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

PREFIX = "kafka_raft_"
STATES = ("leader", "candidate", "voted", "unattached", "follower", "observer", "resigned")
_HEAD_MAX_BYTES = 8192
_READ_TIMEOUT_S = 5.0
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")

_HELP = {
    "current-leader": "current quorum leader id, -1 if unknown",
    "current-epoch": "current quorum epoch, 0 if unknown",
    "current-vote": "the voter this replica voted for in the current epoch, -1 if none",
    "log-end-offset": "log end offset of the metadata log",
    "log-end-epoch": "epoch of the last entry of the metadata log",
    "high-watermark": "high watermark of the metadata log, -1 if unknown",
    "current-state": "current role of this replica (1 for the current state)",
    "number-unknown-voter-connections": "voters without an open connection",
    "election-latency-avg": "average time from candidate to known leader (ms)",
    "election-latency-max": "largest time from candidate to known leader (ms)",
    "commit-latency-avg": "average time from leader append to commit (ms)",
    "commit-latency-max": "largest time from leader append to commit (ms)",
    "fetch-records-rate": "records fetched per second (followers and observers)",
    "append-records-rate": "records appended per second (leader)",
    "poll-idle-ratio-avg": "fraction of time the Raft loop was idle",
}


def metric_name(name: str) -> str:
    return PREFIX + _UNSAFE.sub("_", name)


def render(values: Mapping[str, float | int | str] | None) -> str:
    """The Prometheus text exposition of KIP-595 metrics (``None``: no quorum on this node)."""
    if values is None:
        return f"# TYPE {PREFIX}up gauge\n{PREFIX}up 0\n"
    lines = [f"# TYPE {PREFIX}up gauge", f"{PREFIX}up 1"]
    for name, value in values.items():
        prom = metric_name(name)
        lines.append(f"# HELP {prom} {_HELP.get(name, name)}")
        lines.append(f"# TYPE {prom} gauge")
        if isinstance(value, str):
            states = STATES if value in STATES else (*STATES, value)
            lines.extend(f'{prom}{{state="{s}"}} {1 if s == value else 0}' for s in states)
        else:
            lines.append(f"{prom} {float(value)!r}" if isinstance(value, float) else f"{prom} {value}")
    return "\n".join(lines) + "\n"


class MetricsServer:
    """Serves ``render(collect())`` at ``http://host:port/metrics``."""

    def __init__(
        self, host: str, port: int, collect: Callable[[], Mapping[str, float | int | str] | None],
        extra: Callable[[], str] | None = None,
    ) -> None:  # fmt: skip
        """``extra``: more samples, already in the text format (the replication metrics)."""
        self.host = host
        self.port = port
        self._collect = collect
        self._extra = extra
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=_HEAD_MAX_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics served at http://%s:%d/metrics", self.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            if len(request_line) not in (2, 3):
                status, body = "400 Bad Request", b"bad request: try GET /metrics\n"
            elif request_line[0] == "GET" and request_line[1].split("?", 1)[0] in ("/metrics", "/"):
                text = render(self._collect()) + (self._extra() if self._extra is not None else "")
                status, body = "200 OK", text.encode()
            else:
                status, body = "404 Not Found", b"not found: try GET /metrics\n"
            writer.write(
                f"HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (TimeoutError, ValueError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # a broken or slow client: just close
        except Exception:
            log.exception("metrics endpoint failed")
        finally:
            writer.close()
