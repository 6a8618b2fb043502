"""Security settings this broker cannot honour: refused at start-up, never silently weakened.

A broker started with ``listeners=SASL_SSL://…`` must not serve plaintext without authentication
on that port, and one given ``authorizer.class.name`` must not let everyone do everything. So
``refusals(raw, protocols)`` lists, for every such key, a message naming the key and the fix;
``BrokerConfig.validate`` raises on the first list that is not empty. As each feature becomes
supported, its keys leave these tables (docs/configuration.md lists what is refused).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.security import authorizer_config
from broker.security.sasl.config import is_sasl_key_read_here
from broker.security.tls import check_keys

# Security protocols a listener may use today.
SUPPORTED_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})

# Key prefixes and keys that configure TLS, SASL, authorization or principals (Kafka's names).
REFUSED_PREFIXES = {
    "sasl.": "only sasl.enabled.mechanisms is supported yet",
    "listener.name.": "per-listener settings other than ssl.*, sasl.enabled.mechanisms and plain.sasl.jaas.config "
    "are not supported yet",
    "delegation.token.": "delegation tokens are not supported",
}
REFUSED_KEYS = {
    "principal.builder.class": "principals are not supported yet",
    "connections.max.reauth.ms": "SASL re-authentication is not supported yet",
}
# Keys that are harmless at these values (Kafka's defaults / "off").
HARMLESS_VALUES = {
    "security.inter.broker.protocol": {"PLAINTEXT"},
    "connections.max.reauth.ms": {"0"},
}
DOCS = "see docs/security.md"


def is_security_key(key: str) -> bool:
    """A key read or refused here: start-up names it if need be, so no "unknown key" warning."""
    return (
        key in REFUSED_KEYS
        or key in HARMLESS_VALUES
        or key in authorizer_config.KEYS
        or key.startswith((*REFUSED_PREFIXES, "ssl."))
    )


def _is_listener_ssl_key(key: str) -> bool:
    parts = key.split(".")
    return len(parts) > 3 and parts[0] == "listener" and parts[1] == "name" and parts[3] == "ssl"


def refusals(
    raw: Mapping[str, str],
    listener_protocols: Mapping[str, str],
    plaintext_only: Mapping[str, str] | None = None,
) -> list[str]:
    """Messages for every security setting in ``raw`` that cannot be honoured.

    ``listener_protocols`` maps each configured listener name to its security protocol;
    ``plaintext_only`` maps listeners that must stay PLAINTEXT (this broker's own connections to
    them do not speak TLS yet) to the reason.
    """
    out: list[str] = list(check_keys(raw))
    authorizer_refusal = authorizer_config.refusal(raw)
    if authorizer_refusal is not None:
        out.append(authorizer_refusal)
    for name, why in (plaintext_only or {}).items():
        protocol = listener_protocols.get(name, "PLAINTEXT")
        if protocol != "PLAINTEXT" and protocol in SUPPORTED_PROTOCOLS:
            out.append(
                f"listener {name} is {why} and uses {protocol}: the broker's own connections to it do not "
                f"speak {protocol} yet — map it to PLAINTEXT on a private network and serve clients "
                f"{protocol} on another listener ({DOCS})"
            )
    for name, protocol in listener_protocols.items():
        if protocol not in SUPPORTED_PROTOCOLS:
            out.append(
                f"listener {name} uses security protocol {protocol}, which this broker cannot serve yet "
                f"(supported: {', '.join(sorted(SUPPORTED_PROTOCOLS))}); refusing to start rather than serve it "
                f"without {protocol} — change listeners / listener.security.protocol.map ({DOCS})"
            )
    for key, value in raw.items():
        if value.strip() in HARMLESS_VALUES.get(key, set()) or _is_listener_ssl_key(key) or is_sasl_key_read_here(key):
            continue
        reason = REFUSED_KEYS.get(key)
        if reason is None and key == "security.inter.broker.protocol":
            reason = "inter-broker traffic can only be PLAINTEXT yet"
        if reason is None:
            reason = next((why for prefix, why in REFUSED_PREFIXES.items() if key.startswith(prefix)), None)
        if reason is not None:
            out.append(f"config {key} cannot be honoured: {reason}; remove it to run without it ({DOCS})")
    return out
