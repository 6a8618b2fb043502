"""``metrics.port``: an HTTP endpoint serving ``GET /metrics`` in the Prometheus text format (0.0.4).

The page is prometheus-client's rendering of the broker's collectors (``broker.metrics.collectors``
and the subsystems' ``metrics`` modules, plus prometheus-client's ``ProcessCollector`` and
``GCCollector``); what each sample means and its Kafka MBean: docs/operations.md, "Metrics".

Served on the broker's event loop, rendered there in bounded steps (``broker.metrics.exposition``
says why not in prometheus-client's own server thread). One scrape renders at a time; a second
waits for it (a bound on the work scrapers can ask for).

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

from prometheus_client.registry import Collector

from broker.metrics.exposition import CONTENT_TYPE, Fixed, RenderStats, render_async

log = logging.getLogger(__name__)

_HEAD_MAX_BYTES = 8192
_READ_TIMEOUT_S = 5.0


class MetricsServer:
    """Serves the rendering of ``registry`` (any prometheus-client ``Collector``: a
    ``CollectorRegistry``, or one collector) at ``http://host:port/metrics``."""

    def __init__(self, host: str, port: int, registry: Collector, off_loop: Collector | None = None) -> None:
        """``off_loop``: collectors that read no state of the loop and may block (the process
        collector's ``/proc`` reads): collected in the default executor, rendered after the rest."""
        self.host = host
        self.port = port
        self._registry = registry
        self._off_loop = off_loop
        self._server: asyncio.Server | None = None
        self._rendering = asyncio.Lock()
        self.last_render = RenderStats()  # what the last scrape cost the loop (benchmarks)

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

    async def page(self) -> bytes:
        async with self._rendering:
            collectors: list[Collector] = [self._registry]
            off_loop = self._off_loop
            if off_loop is not None:
                families = await asyncio.get_running_loop().run_in_executor(None, lambda: list(off_loop.collect()))
                collectors.append(Fixed(families))
            stats = RenderStats()
            page = await render_async(collectors, stats=stats)
            self.last_render = stats
            return page

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            if len(request_line) not in (2, 3):
                status, body = "400 Bad Request", b"bad request: try GET /metrics\n"
            elif request_line[0] == "GET" and request_line[1].split("?", 1)[0] in ("/metrics", "/"):
                status, body = "200 OK", await self.page()
            else:
                status, body = "404 Not Found", b"not found: try GET /metrics\n"
            writer.write(
                f"HTTP/1.0 {status}\r\nContent-Type: {CONTENT_TYPE}\r\n"
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
