"""Security settings this broker cannot honour: refused at start-up, never silently weakened.

A broker started with ``listeners=SASL_SSL://…`` must not serve plaintext without authentication
on that port, and one given ``authorizer.class.name`` must not let everyone do everything. So
``refusals(raw, protocols)`` lists, for every such key, a message naming the key and the fix;
``BrokerConfig.validate`` raises on the first list that is not empty. As each feature becomes
supported, its keys leave these tables (docs/configuration.md lists what is refused).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.security.acl import config as authorizer_config
from broker.security.sasl.config import is_sasl_key_read_here
from broker.security.tls import check_keys

# Security protocols a listener may use today.
SUPPORTED_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})

# Key prefixes and keys that configure TLS, SASL, authorization or principals (Kafka's names).
REFUSED_PREFIXES = {
    "sasl.": "only sasl.enabled.mechanisms, sasl.mechanism.inter.broker.protocol and "
    "sasl.mechanism.controller.protocol are supported yet",
    "listener.name.": "per-listener settings other than ssl.*, sasl.enabled.mechanisms and "
    "<plain|scram-sha-256|scram-sha-512>.sasl.jaas.config are not supported yet",
    "delegation.token.": "delegation tokens are not supported",
}
REFUSED_KEYS = {
    "principal.builder.class": "principals are not supported yet",
}
DOCS = "see docs/security.md"


def is_security_key(key: str) -> bool:
    """A key read or refused here: start-up names it if need be, so no "unknown key" warning."""
    return key in REFUSED_KEYS or key in authorizer_config.KEYS or key.startswith((*REFUSED_PREFIXES, "ssl."))


def _is_listener_ssl_key(key: str) -> bool:
    parts = key.split(".")
    return len(parts) > 3 and parts[0] == "listener" and parts[1] == "name" and parts[3] == "ssl"


def refusals(raw: Mapping[str, str], listener_protocols: Mapping[str, str]) -> list[str]:
    """Messages for every security setting in ``raw`` that cannot be honoured.

    ``listener_protocols`` maps each configured listener name to its security protocol. The
    node's own connections to other nodes speak every supported protocol
    (``broker.security.outbound``), so the inter-broker and controller listeners may use any.
    """
    out: list[str] = list(check_keys(raw))
    authorizer_refusal = authorizer_config.refusal(raw)
    if authorizer_refusal is not None:
        out.append(authorizer_refusal)
    for name, protocol in listener_protocols.items():
        if protocol not in SUPPORTED_PROTOCOLS:
            out.append(
                f"listener {name} uses security protocol {protocol}, which this broker cannot serve yet "
                f"(supported: {', '.join(sorted(SUPPORTED_PROTOCOLS))}); refusing to start rather than serve it "
                f"without {protocol} — change listeners / listener.security.protocol.map ({DOCS})"
            )
    for key in raw:
        if _is_listener_ssl_key(key) or is_sasl_key_read_here(key):
            continue
        reason = REFUSED_KEYS.get(key)
        if reason is None:
            reason = next((why for prefix, why in REFUSED_PREFIXES.items() if key.startswith(prefix)), None)
        if reason is not None:
            out.append(f"config {key} cannot be honoured: {reason}; remove it to run without it ({DOCS})")
    return out
