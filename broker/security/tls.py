"""Server TLS contexts from Kafka's ``ssl.*`` keys (KIP-651 PEM, PKCS12), per listener.

A listener's settings are ``ssl.<key>`` overridden by ``listener.name.<listener lower-case>.ssl.<key>``,
as Kafka reads them (``listener_settings``). ``server_context`` turns them into an
``ssl.SSLContext`` or raises ``TlsConfigError`` naming the key and the fix; a value is never put
in a message (keys and passwords). ``check_keys`` refuses, before anything is opened, the
``ssl.*`` keys this broker cannot honour (JKS stores, engine factories) and unusable
``ssl.principal.mapping.rules`` (``broker.security.principal_mapping``).

Keystore: ``ssl.keystore.type`` PEM (``ssl.keystore.location``: one file with the private key and
the certificate chain, or inline ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``;
``ssl.key.password`` decrypts an encrypted key) or PKCS12 (``ssl.keystore.location`` +
``ssl.keystore.password``; needs the ``cryptography`` package). Truststore: PEM
(``ssl.truststore.location`` or inline ``ssl.truststore.certificates``) or PKCS12.
``ssl.client.auth``: none / requested / required. ``ssl.enabled.protocols``: TLSv1.2, TLSv1.3.
``ssl.cipher.suites``: Kafka's (IANA) names or OpenSSL's; they restrict TLS 1.2 suites (Python's
``ssl`` cannot restrict TLS 1.3's).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from pathlib import Path

from broker.security.principal_mapping import PrincipalMapper, PrincipalMappingError
from pyspark_log.wire.tls_stores import NeedsCryptography, StoreError, pkcs12_to_pem, private_file


class TlsConfigError(ValueError):
    """A TLS setting that cannot be used; the message names the key and the fix."""


# Keys read here, with Kafka's defaults.
DEFAULTS = {
    "ssl.keystore.type": "JKS",
    "ssl.truststore.type": "JKS",
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.protocol": "TLSv1.3",
    "ssl.principal.mapping.rules": "DEFAULT",
}
KNOWN = {
    *DEFAULTS,
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.certificates",
    "ssl.cipher.suites",
    # Java (JSSE) tuning with no OpenSSL counterpart: accepted and ignored (docs/configuration.md)
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "ssl.endpoint.identification.algorithm",  # the node's own connections: https (default) or empty
}
REFUSED = {
    "ssl.engine.factory.class": "custom SSL engine factories are Java classes",
    "ssl.provider": "security providers are Java's",
}
_TLS_VERSIONS = {"TLSV1.2": ssl.TLSVersion.TLSv1_2, "TLSV1.3": ssl.TLSVersion.TLSv1_3}
_LISTENER_PREFIX = re.compile(r"^listener\.name\.([^.]+)\.(ssl\..+)$")


def listener_settings(raw: Mapping[str, str], listener: str) -> dict[str, str]:
    """The ``ssl.*`` settings of ``listener``: defaults, then ``ssl.*``, then the listener's own."""
    out = dict(DEFAULTS)
    out.update({k: v for k, v in raw.items() if k.startswith("ssl.")})
    for key, value in raw.items():
        match = _LISTENER_PREFIX.match(key)
        if match and match.group(1).upper() == listener.upper():
            out[match.group(2)] = value
    return out


def check_keys(raw: Mapping[str, str]) -> list[str]:
    """Messages for ``ssl.*`` keys (plain or per listener) this broker cannot honour."""
    out = []
    for key, value in raw.items():
        match = _LISTENER_PREFIX.match(key)
        name = match.group(2) if match else key if key.startswith("ssl.") else None
        if name is None:
            continue
        if name in REFUSED and value.strip():
            out.append(f"config {key} cannot be honoured: {REFUSED[name]}; remove it")
        elif name not in KNOWN and name not in REFUSED:
            out.append(f"config {key} is not a TLS setting this broker knows; remove it (see docs/configuration.md)")
        elif name == "ssl.principal.mapping.rules":
            try:
                PrincipalMapper.parse(value)
            except PrincipalMappingError as exc:
                out.append(f"config {key}: {exc}")
    return out


def server_context(settings: Mapping[str, str], listener: str) -> ssl.SSLContext:
    """An ``SSLContext`` for serving ``listener`` (see the module docstring)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    _load_keystore(ctx, settings, listener)
    _set_client_auth(ctx, settings, listener)
    _set_protocols(ctx, settings, listener)
    suites = settings.get("ssl.cipher.suites", "").strip()
    if suites:
        _set_ciphers(ctx, suites, listener)
    return ctx


def client_context(settings: Mapping[str, str], listener: str) -> ssl.SSLContext:
    """An ``SSLContext`` for this node's own connections to ``listener`` on other nodes (replica
    fetchers, Raft, registration, forwarding), as Kafka's inter-broker and controller clients use
    that listener's ``ssl.*`` settings: the truststore (``ssl.truststore.*``; none given: the
    system's CAs) verifies the peer, the keystore (when given) is the client certificate a peer
    with ``ssl.client.auth`` asks for, and ``ssl.endpoint.identification.algorithm`` ``https``
    (Kafka's default) checks the peer's host name against its certificate; empty does not."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.options |= ssl.OP_NO_RENEGOTIATION
    if settings.get("ssl.truststore.location", "").strip() or settings.get("ssl.truststore.certificates", "").strip():
        _load_truststore(ctx, settings, listener)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    keystore_keys = ("ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key")
    if any(settings.get(key, "").strip() for key in keystore_keys):
        _load_keystore(ctx, settings, listener)
    algorithm = settings.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", ""):
        raise TlsConfigError(
            f"{_key(listener, 'ssl.endpoint.identification.algorithm')} must be https (check the peer's host "
            "name, Kafka's default) or empty (do not)"
        )
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    _set_protocols(ctx, settings, listener)
    suites = settings.get("ssl.cipher.suites", "").strip()
    if suites:
        _set_ciphers(ctx, suites, listener)
    return ctx


def _key(listener: str, name: str) -> str:
    return f"{name} (listener {listener})"


def _load_keystore(ctx: ssl.SSLContext, s: Mapping[str, str], listener: str) -> None:
    chain = s.get("ssl.keystore.certificate.chain", "").strip()
    inline_key = s.get("ssl.keystore.key", "").strip()
    location = s.get("ssl.keystore.location", "").strip()
    kind = s["ssl.keystore.type"].strip().upper()
    if chain or inline_key:
        if not (chain and inline_key) or location:
            raise TlsConfigError(
                f"{_key(listener, 'ssl.keystore.certificate.chain')}: give it together with ssl.keystore.key "
                "(both inline PEM), and no ssl.keystore.location (KIP-651)"
            )
        kind = "PEM"
        pem = inline_key + "\n" + chain + "\n"
        _load_pem_chain(ctx, pem.encode(), s.get("ssl.key.password") or None, listener)
        return
    if not location:
        raise TlsConfigError(
            f"{_key(listener, 'ssl.keystore.location')} is required for a TLS listener "
            "(or inline ssl.keystore.certificate.chain and ssl.keystore.key)"
        )
    if kind not in ("PEM", "PKCS12"):
        raise _unsupported_store("ssl.keystore.type", kind, listener)
    data = _read(location, "ssl.keystore.location", listener)
    if kind == "PEM":
        _load_pem_chain(ctx, data, s.get("ssl.key.password") or None, listener)
    else:
        _load_pem_chain(
            ctx, _pkcs12_to_pem(data, s.get("ssl.keystore.password", ""), "keystore", listener), None, listener
        )


def _set_client_auth(ctx: ssl.SSLContext, s: Mapping[str, str], listener: str) -> None:
    mode = s["ssl.client.auth"].strip().lower()
    if mode not in ("none", "requested", "required"):
        raise TlsConfigError(f"{_key(listener, 'ssl.client.auth')} must be none, requested or required")
    if mode == "none":
        ctx.verify_mode = ssl.CERT_NONE
        return
    _load_truststore(ctx, s, listener)
    ctx.verify_mode = ssl.CERT_REQUIRED if mode == "required" else ssl.CERT_OPTIONAL


def _load_truststore(ctx: ssl.SSLContext, s: Mapping[str, str], listener: str) -> None:
    inline = s.get("ssl.truststore.certificates", "").strip()
    location = s.get("ssl.truststore.location", "").strip()
    if inline:
        try:
            ctx.load_verify_locations(cadata=inline)
        except ssl.SSLError as exc:
            raise TlsConfigError(
                f"{_key(listener, 'ssl.truststore.certificates')} is not PEM certificates: {exc}"
            ) from None
        return
    if not location:
        raise TlsConfigError(
            f"{_key(listener, 'ssl.truststore.location')} (or ssl.truststore.certificates) is required when "
            "ssl.client.auth is requested or required: the CA that signs client certificates"
        )
    kind = s["ssl.truststore.type"].strip().upper()
    if kind not in ("PEM", "PKCS12"):
        raise _unsupported_store("ssl.truststore.type", kind, listener)
    data = _read(location, "ssl.truststore.location", listener)
    if kind == "PKCS12":
        data = _pkcs12_to_pem(data, s.get("ssl.truststore.password", ""), "truststore", listener)
    try:
        ctx.load_verify_locations(cadata=data.decode("ascii", "replace"))
    except ssl.SSLError as exc:
        raise TlsConfigError(
            f"{_key(listener, 'ssl.truststore.location')} holds no usable certificates: {exc}"
        ) from None


def _set_protocols(ctx: ssl.SSLContext, s: Mapping[str, str], listener: str) -> None:
    wanted = [p.strip().upper() for p in s["ssl.enabled.protocols"].split(",") if p.strip()]
    unknown = [p for p in wanted if p not in _TLS_VERSIONS]
    if unknown or not wanted:
        raise TlsConfigError(
            f"{_key(listener, 'ssl.enabled.protocols')}: only TLSv1.2 and TLSv1.3 can be enabled "
            f"(older protocols are insecure){' — not ' + ','.join(unknown) if unknown else ''}"
        )
    versions = sorted(_TLS_VERSIONS[p] for p in wanted)
    ctx.minimum_version = versions[0]
    ctx.maximum_version = versions[-1]
    if s["ssl.protocol"].strip().upper() not in ("TLS", "TLSV1.2", "TLSV1.3"):
        raise TlsConfigError(f"{_key(listener, 'ssl.protocol')} must be TLS, TLSv1.2 or TLSv1.3")


def _set_ciphers(ctx: ssl.SSLContext, suites: str, listener: str) -> None:
    names = [name.strip() for name in suites.split(",") if name.strip()]
    tls12 = [openssl_cipher_name(name) for name in names if not name.startswith(("TLS_AES_", "TLS_CHACHA20_"))]
    if not tls12:
        return  # only TLS 1.3 suites named: OpenSSL's TLS 1.3 defaults apply (docs/compatibility.md)
    try:
        ctx.set_ciphers(":".join(tls12))
    except ssl.SSLError:
        raise TlsConfigError(f"{_key(listener, 'ssl.cipher.suites')}: no cipher suite in it is available") from None


def openssl_cipher_name(name: str) -> str:
    """Kafka's (IANA) TLS 1.2 suite name to OpenSSL's, e.g. ``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``
    → ``ECDHE-RSA-AES128-GCM-SHA256``; an OpenSSL name is returned unchanged."""
    match = re.fullmatch(
        r"TLS_(ECDHE_RSA|ECDHE_ECDSA|DHE_RSA)_WITH_(AES_128_GCM|AES_256_GCM|CHACHA20_POLY1305)_(SHA\d+)", name
    )
    if not match:
        return name
    kx = match.group(1).replace("_", "-")
    cipher = {"AES_128_GCM": "AES128-GCM", "AES_256_GCM": "AES256-GCM", "CHACHA20_POLY1305": "CHACHA20-POLY1305"}
    suffix = "" if match.group(2) == "CHACHA20_POLY1305" else "-" + match.group(3)
    return f"{kx}-{cipher[match.group(2)]}{suffix}"


def _unsupported_store(key: str, kind: str, listener: str) -> TlsConfigError:
    hint = " (convert it: keytool -importkeystore -deststoretype PKCS12)" if kind == "JKS" else ""
    return TlsConfigError(f"{_key(listener, key)}={kind} is not supported: use PEM or PKCS12{hint}")


def _read(path: str, key: str, listener: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{_key(listener, key)}: cannot read {path}: {exc.strerror}") from None


def _pkcs12_to_pem(data: bytes, password: str, store: str, listener: str) -> bytes:
    try:
        return pkcs12_to_pem(data, password)
    except NeedsCryptography:
        raise TlsConfigError(
            f"{_key(listener, f'ssl.{store}.type')}=PKCS12 needs the 'cryptography' package "
            "(pip install cryptography), or use PEM"
        ) from None
    except StoreError:
        raise TlsConfigError(
            f"{_key(listener, f'ssl.{store}.location')}: not a PKCS12 file, or ssl.{store}.password is wrong"
        ) from None


def _load_pem_chain(ctx: ssl.SSLContext, pem: bytes, password: str | None, listener: str) -> None:
    """Load a private key and certificate chain held in memory (written to a private temporary
    file for ``load_cert_chain``, removed at once)."""
    with private_file(pem) as path:
        try:
            ctx.load_cert_chain(path, password=password)
        except ssl.SSLError as exc:
            raise TlsConfigError(
                f"{_key(listener, 'ssl.keystore')}: no usable private key and certificate chain "
                f"(or ssl.key.password is wrong): {exc.reason or exc}"
            ) from None
