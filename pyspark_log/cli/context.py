"""What every command gets: the bootstrap address, the client config, the output, and clients
opened so that failing to connect becomes one line (``cannot reach HOST:PORT: connection refused``).

Client config precedence, lowest first: ``--command-config FILE`` (a Kafka ``.properties`` file),
then ``PYLOG_BOOTSTRAP_SERVERS`` / the default ``127.0.0.1:9092`` unless the file names
``bootstrap.servers``, then ``--bootstrap-server``, then the command's own options (``--acks``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pyspark_log.cli.errors import CliError, UsageError, config_error, unreachable
from pyspark_log.cli.output import Output
from pyspark_log.cli.parsing import parse_properties
from pyspark_log.client import AdminClient, Consumer, Producer
from pyspark_log.client.connection import BrokerConnection
from pyspark_log.client.errors import BrokerConnectionError, ConfigError, KafkaTimeoutError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
BOOTSTRAP_ENV = "PYLOG_BOOTSTRAP_SERVERS"
CLOSE_TIMEOUT_MS = 5000

C = TypeVar("C", AdminClient, Consumer, Producer)


def read_command_config(path: str) -> dict[str, str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read command config {path!r}: {exc.strerror or exc}") from None
    return parse_properties(text)


async def connect_first(bootstrap: str, timeout_ms: float, client_id: str) -> tuple[str, BrokerConnection]:
    """A raw connection (ApiVersions done) to the first of the comma-separated ``bootstrap``
    servers that answers, for a command that sends one request to any node (UnregisterBroker,
    AddRaftVoter, DescribeQuorum ...); returns that server and the connection, which the caller
    closes. A server that is not ``HOST:PORT`` is a ``UsageError``; none answering, one line."""
    last: BrokerConnectionError | None = None
    for server in (s.strip() for s in bootstrap.split(",") if s.strip()):
        host, _, port = server.rpartition(":")
        if not port.isdigit():
            raise UsageError(f"--bootstrap-server {server!r} is not HOST:PORT")
        conn = BrokerConnection(
            host.strip("[]"), int(port), node_id=-1, client_id=client_id, request_timeout_ms=timeout_ms
        )
        try:
            await conn.connect(timeout_ms)
        except BrokerConnectionError as exc:
            last = exc
            continue
        return server, conn
    if last is None:
        raise CliError("--bootstrap-server names no HOST:PORT")
    raise unreachable(bootstrap, last)


@dataclass
class Context:
    """One run's settings; ``config(overrides)`` is the dict a client is built from."""

    bootstrap: str
    client_config: dict[str, str]
    output: Output
    debug: bool = False

    @classmethod
    def build(
        cls, bootstrap_flag: str | None, command_config: str | None, output: Output, *, debug: bool = False
    ) -> Context:
        base = read_command_config(command_config) if command_config else {}
        bootstrap = (
            bootstrap_flag or base.get("bootstrap.servers") or os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP
        )
        bootstrap = bootstrap.strip()
        if not bootstrap:
            raise UsageError("--bootstrap-server must name at least one HOST:PORT")
        base["bootstrap.servers"] = bootstrap
        return cls(bootstrap, base, output, debug)

    def config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The client config with ``overrides`` (Kafka key names; None values are skipped)."""
        out: dict[str, Any] = dict(self.client_config)
        out.update({k: v for k, v in (overrides or {}).items() if v is not None})
        return out

    def _open(self, factory: Callable[[dict[str, Any]], C], config: dict[str, Any]) -> C:
        try:
            return factory(config)
        except ConfigError as exc:
            raise config_error(exc) from None
        except BrokerConnectionError as exc:
            raise unreachable(self.bootstrap, exc) from None
        except KafkaTimeoutError:
            raise CliError(f"cannot reach {self.bootstrap}: no answer (timed out)") from None

    @contextlib.contextmanager
    def admin(self, overrides: Mapping[str, Any] | None = None) -> Iterator[AdminClient]:
        client = self._open(AdminClient, self.config(overrides))
        try:
            yield client
        finally:
            with contextlib.suppress(Exception):
                client.close(CLOSE_TIMEOUT_MS)

    @contextlib.contextmanager
    def consumer(self, overrides: Mapping[str, Any] | None = None) -> Iterator[Consumer]:
        client = self._open(Consumer, self.config(overrides))
        try:
            yield client
        finally:
            with contextlib.suppress(Exception):
                client.close(CLOSE_TIMEOUT_MS)

    def producer(self, overrides: Mapping[str, Any] | None = None) -> Producer:
        """A producer; the caller flushes and closes it (closing decides what is delivered)."""
        return self._open(Producer, self.config(overrides))
