"""Per-listener SASL settings under Kafka's names.

``sasl.enabled.mechanisms`` (overridden by ``listener.name.<listener>.sasl.enabled.mechanisms``)
names the mechanisms a SASL listener offers (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; SCRAM users
are the salted credentials in the cluster metadata, AlterUserScramCredentials); Kafka's default
is GSSAPI, which pylog does not serve, so the key must be given. PLAIN reads its users from the listener's JAAS value
``listener.name.<listener lower-case>.plain.sasl.jaas.config`` (``PlainLoginModule required
user_alice="alice-secret" ...;``), as Kafka's broker does. ``listener_config`` raises
``SaslConfigError`` naming the key; never a value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.security.sasl.plain import PlainServer
from broker.security.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from broker.security.sasl.scram import CredentialLookup, ScramServer
from pyspark_log.wire.jaas import JaasError, parse_jaas, plain_users

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# sasl keys read here (the rest of sasl.* is refused by broker.security.unsupported)
_LISTENER_KEY = re.compile(
    r"^listener\.name\.([^.]+)\.(sasl\.enabled\.mechanisms|(plain|scram-sha-256|scram-sha-512)\.sasl\.jaas\.config)$"
)
# the mechanisms this node logs in with on other nodes' SASL listeners (broker.security.outbound)
_CLIENT_KEYS = frozenset({"sasl.mechanism.inter.broker.protocol", "sasl.mechanism.controller.protocol"})


class SaslConfigError(ValueError):
    """A SASL setting that cannot be used; names the key and the fix."""


def is_sasl_key_read_here(key: str) -> bool:
    return key == "sasl.enabled.mechanisms" or key in _CLIENT_KEYS or _LISTENER_KEY.match(key) is not None


@dataclass(frozen=True)
class SaslListenerConfig:
    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    reauth_ms: int = 0  # connections.max.reauth.ms (KIP-368); 0: a login never expires

    def server(self, mechanism: str, scram: CredentialLookup) -> PlainServer | ScramServer:
        """A fresh server of an enabled ``mechanism`` for one authentication; SCRAM credentials
        come from ``scram`` (the metadata image at the time of the login)."""
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        if mechanism in SCRAM_MECHANISMS:
            return ScramServer(mechanism, scram)
        raise SaslConfigError(f"mechanism {mechanism} is not enabled on listener {self.listener}")


def listener_config(raw: Mapping[str, str], listener: str) -> SaslListenerConfig:
    prefix = f"listener.name.{listener.lower()}."
    key = prefix + "sasl.enabled.mechanisms"
    if key not in raw:
        key = "sasl.enabled.mechanisms"
    text = raw.get(key, "")
    mechanisms = tuple(m.strip().upper() for m in text.split(",") if m.strip())
    if not mechanisms:
        raise SaslConfigError(
            f"listener {listener} is a SASL listener: set sasl.enabled.mechanisms (or {prefix}sasl.enabled.mechanisms) "
            f"to one of {', '.join(SUPPORTED_MECHANISMS)} (Kafka's default GSSAPI is not served)"
        )
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise SaslConfigError(
            f"{key}: {', '.join(unsupported)} cannot be served (supported: {', '.join(SUPPORTED_MECHANISMS)})"
        )
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        jaas_key = prefix + "plain.sasl.jaas.config"
        if jaas_key not in raw:
            raise SaslConfigError(
                f"{jaas_key} is required for PLAIN on listener {listener}: "
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="..." ...;'
            )
        try:
            users = plain_users(parse_jaas(raw[jaas_key]))
        except JaasError as exc:
            raise SaslConfigError(f"{jaas_key}: {exc}") from None
        if not users:
            raise SaslConfigError(f'{jaas_key} defines no user (user_<name>="<password>")')
    return SaslListenerConfig(listener, mechanisms, users, _reauth_ms(raw))


def _reauth_ms(raw: Mapping[str, str]) -> int:
    text = raw.get("connections.max.reauth.ms", "0").strip()
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise SaslConfigError(
            "connections.max.reauth.ms must be a whole number of milliseconds >= 0 (0, Kafka's default: "
            "logins never expire)"
        )
    return value
