"""The CLI's error model: every failure reaches the user as one line on stderr and an exit code.

``CliError`` (exit 1) is an operation that failed; ``UsageError`` (exit 2) is a command line or
config file the CLI cannot act on. ``describe`` turns any exception from the client into the one
line, naming Kafka's error code in parentheses: ``topic 'x' already exists (TOPIC_ALREADY_EXISTS)``.
"""

from __future__ import annotations

import errno
import re

from pyspark_log.client.errors import BrokerConnectionError, ConfigError, ErrorCode, KafkaError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """An operation failed; ``str(exc)`` is the line printed after ``pylog: ``."""

    exit_code = EXIT_ERROR


class UsageError(CliError):
    """A bad argument, option combination or config file."""

    exit_code = EXIT_USAGE


# Connect failures as asyncio / the OS word them -> the short reason a user wants to read.
_REASONS = (
    (re.compile(rf"Errno {errno.ECONNREFUSED}\b|Connect call failed|refused", re.IGNORECASE), "connection refused"),
    (re.compile(r"timed out", re.IGNORECASE), "connection timed out"),
    (re.compile(r"Name or service not known|nodename nor servname|Errno -[23]\b", re.IGNORECASE), "unknown host"),
    (re.compile(rf"Errno {errno.EHOSTUNREACH}\b|No route to host", re.IGNORECASE), "no route to host"),
    (re.compile(rf"Errno {errno.ENETUNREACH}\b|Network is unreachable", re.IGNORECASE), "network unreachable"),
    (re.compile(r"closed by the broker|reset by peer", re.IGNORECASE), "the connection was closed"),
)


def connection_reason(exc: BrokerConnectionError) -> str:
    """``connection refused`` / ``connection timed out`` / ... or the client's own words."""
    text = exc.message or str(exc)
    for pattern, reason in _REASONS:
        if pattern.search(text):
            return reason
    return text


def unreachable(bootstrap: str, exc: BrokerConnectionError) -> CliError:
    return CliError(f"cannot reach {bootstrap}: {connection_reason(exc)}")


# The client prefixes a broker's message with what it was doing ("create topic t; ...").
_CLIENT_CONTEXT = re.compile(
    r"^(?:create topic|delete topic|create partitions for|alter configs|describe topic|describe configs) \S+; "
)


def _strip_context(message: str | None) -> str:
    """The broker's own words from a client message ``"create topic t; topic 't' already exists"``."""
    return _CLIENT_CONTEXT.sub("", message or "", count=1)


def kafka_error(exc: KafkaError, subject: str | None = None) -> CliError:
    """One line for a ``KafkaError``: known codes phrased for ``subject`` (a topic name, say),
    the broker's message otherwise, always ending in ``(CODE_NAME)``."""
    code = exc.code
    if isinstance(exc, BrokerConnectionError):
        return CliError(f"lost the connection to the broker: {connection_reason(exc)} ({code.name})")
    if subject is not None and code == ErrorCode.TOPIC_ALREADY_EXISTS:
        return CliError(f"topic {subject!r} already exists ({code.name})")
    if subject is not None and code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID):
        return CliError(f"topic {subject!r} does not exist ({code.name})")
    detail = _strip_context(exc.message) or code.name.lower().replace("_", " ")
    prefix = f"topic {subject!r}: " if subject is not None and repr(subject) not in detail else ""
    return CliError(f"{prefix}{detail} ({code.name})")


def config_error(exc: ConfigError) -> UsageError:
    return UsageError(f"bad client config: {exc}")
