"""Kafka's JAAS configuration values (``sasl.jaas.config``), parsed without Java: the broker's
listener logins and the Java client's ``sasl.jaas.config`` (what Spark's ``kafka.sasl.jaas.config``
passes to pylog's client).

Grammar, as Kafka's ``JaasConfig`` reads one entry::

    <login module class> <required|requisite|sufficient|optional> [<key>=<value> ...];

A value is a double- or single-quoted string (``\\"``, ``\\'`` and ``\\\\`` escapes) or a bare
token. Only one login module per value is accepted (Kafka requires exactly one for
``sasl.jaas.config``). ``client_login_module`` also accepts the class names of Databricks' shaded
Kafka client (``kafkashaded.org.apache.kafka...``), which name the same login modules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(
    r"\s*(?:(?P<key>[A-Za-z0-9_.\-]+)\s*=\s*"
    r"""(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|'(?P<single>(?:[^'\\]|\\.)*)'|(?P<bare>[^\s;"']+))|(?P<end>;))"""
)
# Databricks Runtime shades the Kafka client under this package prefix (kafkashaded.org.apache.kafka...)
SHADED_PREFIX = "kafkashaded."


class JaasError(ValueError):
    """A JAAS value that cannot be parsed; the message says where (never the values)."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str]


def parse_jaas(text: str) -> JaasEntry:
    head = text.strip().split(None, 2)
    if len(head) < 2:
        raise JaasError("expected '<LoginModule class> required key=\"value\" ...;'")
    module, flag = head[0], head[1].rstrip(";")
    if flag.lower() not in _FLAGS:
        raise JaasError(f"login module flag must be one of {', '.join(_FLAGS)}")
    rest = head[2] if len(head) > 2 else ""
    if head[1].endswith(";"):
        rest = ";" + rest
    options: dict[str, str] = {}
    pos = 0
    ended = False
    while pos < len(rest):
        if not rest[pos:].strip():
            break
        match = _TOKEN.match(rest, pos)
        if match is None or ended:
            raise JaasError(f"cannot parse the options at character {pos} (key=\"value\" pairs, ending with ';')")
        if match.group("end"):
            ended = True
        else:
            value = match.group("quoted")
            if value is None:
                value = match.group("single")
            value = re.sub(r"\\(.)", r"\1", value) if value is not None else match.group("bare")
            options[match.group("key")] = value
        pos = match.end()
    if not ended:
        raise JaasError("the value must end with ';'")
    return JaasEntry(module, flag.lower(), options)


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """The users a PlainLoginModule entry defines for the broker: ``user_<name>="<password>"``."""
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise JaasError(f"PLAIN needs {PLAIN_LOGIN_MODULE}, not another login module")
    return {key[len("user_") :]: value for key, value in entry.options.items() if key.startswith("user_")}


def client_login_module(entry: JaasEntry) -> str:
    """The entry's login module with Databricks' shading prefix removed, so that
    ``kafkashaded.org.apache.kafka.common.security.plain.PlainLoginModule`` is PLAIN's module."""
    return entry.login_module.removeprefix(SHADED_PREFIX)
