"""TLS for pylog's client under librdkafka's key names.

``security.protocol=SSL`` makes every connection of a client (bootstrap, brokers, group
coordinator, transaction coordinator) a TLS connection: ``ssl.ca.location`` is the CA file that
signs the brokers' certificates (the system's CAs when empty), ``ssl.certificate.location`` and
``ssl.key.location`` (``ssl.key.password``) the client certificate for mTLS, and
``ssl.endpoint.identification.algorithm`` ``https`` (librdkafka's default) checks the broker's
host name against its certificate, ``none`` does not.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from typing import Any

from pyspark_log.client.connection import Connector, Writer, open_tcp
from pyspark_log.client.errors import ConfigError


def client_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """The TLS context of a client configured with librdkafka's ``ssl.*`` keys."""
    ca = config.get("ssl.ca.location") or None
    try:
        ctx = ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl.ca.location {ca!r} cannot be used as CA certificates: {exc}") from None
    cert = config.get("ssl.certificate.location") or None
    key = config.get("ssl.key.location") or None
    if key and not cert:
        raise ConfigError("ssl.key.location needs ssl.certificate.location (the client certificate)")
    if cert:
        try:
            ctx.load_cert_chain(cert, key, config.get("ssl.key.password") or None)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"ssl.certificate.location / ssl.key.location cannot be loaded (or ssl.key.password is wrong): {exc}"
            ) from None
    ctx.check_hostname = str(config.get("ssl.endpoint.identification.algorithm", "https")).lower() == "https"
    return ctx


def connector_for(config: Mapping[str, Any], default: Connector = open_tcp) -> Connector:
    """``default`` for PLAINTEXT, a TLS connector for ``security.protocol=SSL``."""
    if str(config.get("security.protocol", "PLAINTEXT")).upper() != "SSL":
        return default
    ctx = client_context(config)

    async def open_tls(host: str, port: int) -> tuple[asyncio.StreamReader, Writer]:
        reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host, limit=1 << 20)
        return reader, writer

    return open_tls
