"""How this node secures its own connections to other nodes, under Kafka's keys.

A node connects to another with the security protocol of the listener it targets (Kafka's
``inter.broker.listener.name`` / ``security.inter.broker.protocol`` for broker-to-broker traffic,
the first of ``controller.listener.names`` for traffic to the controllers):

- SSL / SASL_SSL: ``client_context`` of that listener's ``ssl.*`` settings
  (``listener.name.<listener>.ssl.*`` over ``ssl.*``): the truststore verifies the peer, the
  keystore is the client certificate, ``ssl.endpoint.identification.algorithm`` checks host names.
- SASL_PLAINTEXT / SASL_SSL: the mechanism is ``sasl.mechanism.inter.broker.protocol`` (broker to
  broker) or ``sasl.mechanism.controller.protocol`` (to a controller); Kafka's default for both is
  GSSAPI, which pylog does not speak, so the key must be given. The node logs in with the
  ``username`` / ``password`` options of ``listener.name.<listener>.<mechanism>.sasl.jaas.config``
  (Kafka's per-listener JAAS value; its ``user_<name>`` entries are the listener's PLAIN users).

``outbound_security`` is pure (configuration in, ``OutboundSecurity`` out) and raises
``OutboundConfigError`` naming the key and the fix, never a value.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.security.sasl.config import SUPPORTED_MECHANISMS
from broker.security.tls import TlsConfigError, client_context, listener_settings
from pyspark_log.wire.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, JaasError, parse_jaas

INTER_BROKER_MECHANISM_KEY = "sasl.mechanism.inter.broker.protocol"
CONTROLLER_MECHANISM_KEY = "sasl.mechanism.controller.protocol"


class OutboundConfigError(ValueError):
    """A setting of this node's own connections that cannot be used; names the key and the fix."""


@dataclass(frozen=True)
class SaslLogin:
    """Who this node logs in as on a SASL listener of another node."""

    mechanism: str
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class OutboundSecurity:
    """TLS and/or SASL of connections to ``listener`` (``protocol``) on other nodes."""

    listener: str
    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = field(default=None, repr=False)
    sasl: SaslLogin | None = None


PLAINTEXT = OutboundSecurity("PLAINTEXT")


def jaas_key(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def outbound_security(raw: Mapping[str, str], listener: str, protocol: str, mechanism_key: str) -> OutboundSecurity:
    """The security of this node's connections to ``listener`` (of security ``protocol``) on other
    nodes; ``mechanism_key`` names the SASL mechanism key of this kind of traffic."""
    tls = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            tls = client_context(listener_settings(raw, listener), listener)
        except TlsConfigError as exc:
            raise OutboundConfigError(f"connections to listener {listener}: {exc}") from None
    sasl = _sasl_login(raw, listener, mechanism_key) if protocol.startswith("SASL_") else None
    return OutboundSecurity(listener, protocol, tls, sasl)


def _sasl_login(raw: Mapping[str, str], listener: str, mechanism_key: str) -> SaslLogin:
    mechanism = raw.get(mechanism_key, "").strip().upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        shown = f"={mechanism}" if mechanism else " is not set (Kafka's default GSSAPI is not spoken)"
        raise OutboundConfigError(
            f"{mechanism_key}{shown}: listener {listener} is a SASL listener this node connects to; set "
            f"{mechanism_key} to one of {', '.join(SUPPORTED_MECHANISMS)}"
        )
    key = jaas_key(listener, mechanism)
    module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
    example = f'{module} required username="..." password="...";'
    if key not in raw:
        raise OutboundConfigError(f"{key} is required: this node logs in to listener {listener} with it ({example})")
    try:
        entry = parse_jaas(raw[key])
    except JaasError as exc:
        raise OutboundConfigError(f"{key}: {exc}") from None
    if entry.login_module != module:
        raise OutboundConfigError(f"{key}: {mechanism} needs {module}")
    username = entry.options.get("username", "")
    if not username or "password" not in entry.options:
        raise OutboundConfigError(
            f'{key} has no username="..." password="..." for this node to log in to listener {listener} with'
        )
    return SaslLogin(mechanism, username, entry.options["password"])
