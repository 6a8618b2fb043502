"""TLS and SASL for pylog's client under librdkafka's key names: the connector that opens every
connection of a client (bootstrap, brokers, group and transaction coordinators).

``security.protocol`` ``SSL`` / ``SASL_SSL`` wrap connections in TLS: ``ssl.ca.location`` is the CA file that
signs the brokers' certificates (the system's CAs when empty), ``ssl.certificate.location`` and
``ssl.key.location`` (``ssl.key.password``) the client certificate for mTLS, and
``ssl.endpoint.identification.algorithm`` ``https`` (librdkafka's default) checks the broker's
host name against its certificate, ``none`` (or empty, as the Java client says it) does not. The
Java client's stores serve too (``ssl.truststore.*``, ``ssl.keystore.*``, PEM or PKCS12).

``SASL_PLAINTEXT`` / ``SASL_SSL`` log in right after connecting, before the connection is
handed over: SaslHandshake v1 then SaslAuthenticate v2 (KIP-152) with ``sasl.mechanism`` PLAIN
(or SCRAM-SHA-256 / SCRAM-SHA-512, RFC 5802 / 7677, checking the broker's signature) and
``sasl.username`` / ``sasl.password``. A refused login raises the broker's error
(SASL_AUTHENTICATION_FAILED with its message); the password never appears in an error.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Mapping
from typing import Any

from pyspark_log.client.connection import Connector, Reader, Writer, open_tcp
from pyspark_log.client.errors import BrokerConnectionError, ConfigError, error_for
from pyspark_log.client.stream import open_stream
from pyspark_log.wire import ApiKey, decode_response, encode_request
from pyspark_log.wire.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, JaasError, client_login_module, parse_jaas
from pyspark_log.wire.scram import ScramClient, ScramError
from pyspark_log.wire.tls_stores import NeedsCryptography, StoreError, private_file, read_store

__all__ = ["SASL_MECHANISMS", "ScramClient", "client_context", "connector_for"]

SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def client_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """The TLS context of a client configured with librdkafka's ``ssl.*`` keys or the Java
    client's (``ssl.truststore.*``, ``ssl.keystore.*``: PEM or PKCS12, as Spark's ``kafka.ssl.*``
    options pass them); ConfigError names the key and the fix."""
    ctx = _trusting_context(config)
    _load_client_certificate(ctx, config)
    # Java's empty ssl.endpoint.identification.algorithm and librdkafka's "none": no host check
    ctx.check_hostname = str(config.get("ssl.endpoint.identification.algorithm", "https")).lower() == "https"
    return ctx


def _trusting_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """A context that trusts ``ssl.ca.location`` (librdkafka), else ``ssl.truststore.location``
    (Java; PEM, or PKCS12 with ``ssl.truststore.password``), else the system's CAs."""
    ca = config.get("ssl.ca.location") or None
    truststore = config.get("ssl.truststore.location") or None
    cadata = None
    if ca is None and truststore is not None:
        kind = str(config.get("ssl.truststore.type") or "PEM").upper()
        password = str(config.get("ssl.truststore.password") or "")
        pem = _read_store(truststore, kind, password, "ssl.truststore")
        if kind == "PEM":
            ca = truststore
        else:
            cadata = pem.decode("ascii", "replace")
    try:
        return ssl.create_default_context(cafile=ca, cadata=cadata)
    except (OSError, ssl.SSLError) as exc:
        key = "ssl.ca.location" if ca is not None and truststore is None else "ssl.truststore.location"
        raise ConfigError(f"{key} {ca or truststore!r} cannot be used as CA certificates: {exc}") from None


def _load_client_certificate(ctx: ssl.SSLContext, config: Mapping[str, Any]) -> None:
    """mTLS: librdkafka's ``ssl.certificate.location`` + ``ssl.key.location``, or the Java
    client's ``ssl.keystore.location`` (PEM: key and chain in one file; PKCS12 with
    ``ssl.keystore.password``); ``ssl.key.password`` decrypts an encrypted PEM key."""
    cert = config.get("ssl.certificate.location") or None
    key = config.get("ssl.key.location") or None
    keystore = config.get("ssl.keystore.location") or None
    key_password = config.get("ssl.key.password") or None
    if key and not cert:
        raise ConfigError("ssl.key.location needs ssl.certificate.location (the client certificate)")
    if cert:
        try:
            ctx.load_cert_chain(cert, key, key_password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"ssl.certificate.location / ssl.key.location cannot be loaded (or ssl.key.password is wrong): {exc}"
            ) from None
        return
    if keystore is None:
        return
    kind = str(config.get("ssl.keystore.type") or "JKS").upper()
    pem = _read_store(keystore, kind, str(config.get("ssl.keystore.password") or ""), "ssl.keystore")
    with private_file(pem) as path:
        try:
            ctx.load_cert_chain(path, password=key_password if kind == "PEM" else None)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"ssl.keystore.location {keystore!r} holds no usable private key and certificate "
                f"(or ssl.key.password is wrong): {exc.reason or exc}"
            ) from None


def _read_store(path: str, kind: str, password: str, prefix: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConfigError(f"{prefix}.location {path!r} cannot be read: {exc.strerror}") from None
    try:
        return read_store(data, kind, password)
    except NeedsCryptography:
        raise ConfigError(
            f"{prefix}.type={kind} needs the 'cryptography' package: pip install 'pyspark-pylog[tls]', "
            "or give PEM files"
        ) from None
    except StoreError as exc:
        raise ConfigError(
            f"{prefix}.location {path!r} ({prefix}.type={kind}): {exc}; check {prefix}.password"
        ) from None


def connector_for(config: Mapping[str, Any], default: Connector = open_tcp) -> Connector:
    """``default`` for PLAINTEXT; otherwise a connector that adds TLS and/or the SASL login."""
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol == "PLAINTEXT":
        return default
    ctx = client_context(config) if protocol in ("SSL", "SASL_SSL") else None
    login = _sasl_login(config) if protocol.startswith("SASL_") else None
    client_id = str(config.get("client.id", "pylog"))

    async def open_secure(host: str, port: int) -> tuple[Reader, Writer]:
        reader, writer = await open_stream(host, port, ssl_context=ctx)
        if login is not None:
            try:
                await _sasl_exchange(reader, writer, login, client_id, f"{host}:{port}")
            except BaseException:
                writer.close()
                raise
        return reader, writer

    return open_secure


def _sasl_login(config: Mapping[str, Any]) -> tuple[str, str, str]:
    mechanism = str(config.get("sasl.mechanism") or "PLAIN").upper()
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError(f"sasl.mechanism {mechanism!r} is not supported (supported: {', '.join(SASL_MECHANISMS)})")
    user = str(config.get("sasl.username") or "")
    password = str(config.get("sasl.password") or "")
    jaas = str(config.get("sasl.jaas.config") or "")
    if not user and jaas:  # the Java client's way (Spark's kafka.sasl.jaas.config)
        user, password = _jaas_login(jaas)
    if not user:
        raise ConfigError("sasl.username is required with security.protocol SASL_PLAINTEXT or SASL_SSL")
    return mechanism, user, password


_CLIENT_LOGIN_MODULES = (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE)


def _jaas_login(jaas: str) -> tuple[str, str]:
    """``username`` and ``password`` of a PlainLoginModule / ScramLoginModule JAAS value (Kafka's
    class names or Databricks' shaded ``kafkashaded.`` ones; values double- or single-quoted)."""
    try:
        entry = parse_jaas(jaas)
    except JaasError as exc:
        raise ConfigError(f"sasl.jaas.config cannot be parsed: {exc}") from None
    if client_login_module(entry) not in _CLIENT_LOGIN_MODULES:
        raise ConfigError("sasl.jaas.config must use PlainLoginModule or ScramLoginModule (username=... password=...)")
    if not entry.options.get("username"):
        raise ConfigError('sasl.jaas.config has no username="..."')
    return entry.options["username"], entry.options.get("password", "")


async def _sasl_exchange(
    reader: Reader, writer: Writer, login: tuple[str, str, str], client_id: str, where: str
) -> None:
    mechanism, user, password = login
    handshake = await _call(
        reader, writer, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism}, client_id=client_id, where=where
    )
    if handshake.error_code:
        raise error_for(
            handshake.error_code,
            f"the broker offers {', '.join(handshake.mechanisms) or 'no mechanism'}",
            context=f"SASL handshake with {where}",
        )

    async def step(token: bytes) -> bytes:
        answer = await _call(
            reader, writer, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token}, client_id=client_id, where=where
        )
        if answer.error_code:
            raise error_for(answer.error_code, answer.error_message, context=f"SASL {mechanism} login at {where}")
        return bytes(answer.auth_bytes)

    if mechanism == "PLAIN":
        await step(b"\0" + user.encode() + b"\0" + password.encode())
        return
    scram = ScramClient(mechanism, user, password)
    try:
        server_first = await step(scram.first())
        # PBKDF2 takes milliseconds: off the event loop
        client_final = await asyncio.get_running_loop().run_in_executor(None, scram.final, server_first)
        scram.verify(await step(client_final))
    except ScramError as exc:
        raise BrokerConnectionError(f"{exc} ({where})") from None


async def _call(
    reader: Reader, writer: Writer, api_key: int, version: int, body: Mapping[str, Any],
    *, client_id: str, where: str,
) -> Any:  # fmt: skip
    writer.write(encode_request(api_key, version, 0, client_id, body))
    await writer.drain()
    try:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        frame = await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        raise BrokerConnectionError(f"{where} closed the connection during SASL authentication") from None
    _, response = decode_response(api_key, version, frame)
    return response
