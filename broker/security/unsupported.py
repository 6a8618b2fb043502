"""Security settings this broker cannot honour: refused at start-up, never silently weakened.

A broker started with ``listeners=SASL_SSL://…`` must not serve plaintext without authentication
on that port, and one given ``authorizer.class.name`` must not let everyone do everything. So
``refusals(raw, protocols)`` lists, for every such key, a message naming the key and the fix;
``BrokerConfig.validate`` raises on the first list that is not empty. As each feature becomes
supported, its keys leave these tables (docs/configuration.md lists what is refused).
"""

from __future__ import annotations

from collections.abc import Mapping

# Security protocols a listener may use today.
SUPPORTED_PROTOCOLS = frozenset({"PLAINTEXT"})

# Key prefixes and keys that configure TLS, SASL, authorization or principals (Kafka's names).
REFUSED_PREFIXES = {
    "ssl.": "TLS is not supported yet",
    "sasl.": "SASL is not supported yet",
    "listener.name.": "per-listener security settings (TLS, SASL) are not supported yet",
    "delegation.token.": "delegation tokens are not supported",
}
REFUSED_KEYS = {
    "authorizer.class.name": "authorization (ACLs) is not supported yet: every client may do everything",
    "super.users": "authorization (ACLs) is not supported yet",
    "allow.everyone.if.no.acl.found": "authorization (ACLs) is not supported yet",
    "principal.builder.class": "principals are not supported yet",
    "connections.max.reauth.ms": "SASL re-authentication is not supported yet",
}
# Keys that are harmless at these values (Kafka's defaults / "off").
HARMLESS_VALUES = {
    "authorizer.class.name": {""},
    "security.inter.broker.protocol": {"PLAINTEXT"},
    "connections.max.reauth.ms": {"0"},
}
DOCS = "see docs/security.md"


def is_security_key(key: str) -> bool:
    """A key these tables refuse at some value: start-up names it, so no "unknown key" warning."""
    return key in REFUSED_KEYS or key in HARMLESS_VALUES or key.startswith(tuple(REFUSED_PREFIXES))


def refusals(raw: Mapping[str, str], listener_protocols: Mapping[str, str]) -> list[str]:
    """Messages for every security setting in ``raw`` that cannot be honoured.

    ``listener_protocols`` maps each configured listener name to its security protocol.
    """
    out: list[str] = []
    for name, protocol in listener_protocols.items():
        if protocol not in SUPPORTED_PROTOCOLS:
            out.append(
                f"listener {name} uses security protocol {protocol}, which this broker cannot serve yet "
                f"(supported: {', '.join(sorted(SUPPORTED_PROTOCOLS))}); refusing to start rather than serve it "
                f"without {protocol} — change listeners / listener.security.protocol.map ({DOCS})"
            )
    for key, value in raw.items():
        if value.strip() in HARMLESS_VALUES.get(key, set()):
            continue
        reason = REFUSED_KEYS.get(key)
        if reason is None and key == "security.inter.broker.protocol":
            reason = "inter-broker traffic can only be PLAINTEXT yet"
        if reason is None:
            reason = next((why for prefix, why in REFUSED_PREFIXES.items() if key.startswith(prefix)), None)
        if reason is not None:
            out.append(f"config {key} cannot be honoured: {reason}; remove it to run without it ({DOCS})")
    return out
