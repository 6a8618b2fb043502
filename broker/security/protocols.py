"""Listener names and their security protocols (Kafka's ``listener.security.protocol.map``).

Kafka's rule, kept verbatim: a listener's protocol is its entry in
``listener.security.protocol.map``; with no map given, the map is the identity on the four
protocol names (``PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL``),
so a listener named after a protocol uses it and any other name must be mapped.
"""

from __future__ import annotations

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = {name: name for name in SECURITY_PROTOCOLS}


class ProtocolMapError(ValueError):
    """``listener.security.protocol.map`` or a listener name that cannot be resolved; names the fix."""


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` → ``{NAME: PROTOCOL}`` (names upper-cased); empty text → Kafka's default."""
    if not text.strip():
        return dict(DEFAULT_PROTOCOL_MAP)
    out: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or not protocol:
            raise ProtocolMapError(
                f"listener.security.protocol.map entry {item!r} is not NAME:PROTOCOL (e.g. CONTROLLER:PLAINTEXT)"
            )
        if protocol not in SECURITY_PROTOCOLS:
            known = ", ".join(SECURITY_PROTOCOLS)
            raise ProtocolMapError(f"listener.security.protocol.map entry {item!r}: {protocol} is not one of {known}")
        out[name] = protocol
    return out


def listener_protocol(name: str, protocol_map: dict[str, str]) -> str:
    """The security protocol of listener ``name`` under ``protocol_map`` (from ``parse_protocol_map``)."""
    protocol = protocol_map.get(name.upper())
    if protocol is None:
        raise ProtocolMapError(
            f"listener {name}: no security protocol defined for it in listener.security.protocol.map "
            f"(add {name}:PLAINTEXT, or name the listener after its protocol)"
        )
    return protocol
