"""The broker's application logs: format, files, rotation, and Kafka's named loggers.

Kafka configures its logs with log4j (``config/log4j2.yaml``); pylog with the standard library's
``logging``, driven by a few pylog-specific ``server.properties`` keys (docs/configuration.md):

* ``log.format`` — ``text`` (default: ``<time> <LEVEL> <logger>: <message> k=v ...``) or ``json``
  (one object per line: ``timestamp`` ISO-8601 UTC, ``level``, ``logger``, ``message``,
  ``node_id``, the structured fields as keys, ``exception`` when there is one).
* ``kafka.logs.dir`` — when set, the logs also go to rotating files there, named as Kafka's
  log4j config names them: ``server.log`` (everything), ``state-change.log``
  (``state.change.logger`` only) and ``kafka-request.log`` (``kafka.request.logger`` only). The
  two named loggers then do not reach ``server.log`` or stderr (log4j's ``additivity: false``).
* ``log.file.max.bytes`` / ``log.file.backup.count`` — each file rolls over at this size and
  keeps this many old files (``logging.handlers.RotatingFileHandler``).

Structured fields: code passes them as ``extra={"fields": {...}}``; the text format appends them
as ``k=v``, the json format puts them as keys (a field never replaces one of the keys above).

Kafka's named loggers, with the levels Kafka's shipped log4j config gives them:
``kafka.request.logger`` WARN (its DEBUG lines, one per request, are off) and
``state.change.logger`` INFO (one line per leadership/ISR change). Levels change at run time
through DescribeConfigs/IncrementalAlterConfigs on the ``BROKER_LOGGER`` resource (KIP-412,
``kafka-configs --entity-type broker-loggers``): ``describe_loggers``, ``set_logger_level``,
``reset_logger_level`` here; the wire handling is ``broker.api.configs``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import logging.handlers
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REQUEST_LOGGER = "kafka.request.logger"
STATE_CHANGE_LOGGER = "state.change.logger"
ROOT_LOGGER = "root"  # Kafka's name of the root logger (Log4jController.ROOT_LOGGER)

# Kafka's log4j config: the request logger at WARN (its per-request DEBUG lines off), the
# state-change logger at INFO.
DEFAULT_LEVELS = {REQUEST_LOGGER: "WARN", STATE_CHANGE_LOGGER: "INFO"}
# The files of Kafka's log4j config under ``kafka.logs.dir``.
SERVER_LOG, STATE_CHANGE_LOG, REQUEST_LOG = "server.log", "state-change.log", "kafka-request.log"

TRACE = 5  # log4j's TRACE, below Python's DEBUG
logging.addLevelName(TRACE, "TRACE")

# log4j level names (LogLevelConfig.VALID_LOG_LEVELS) <-> Python levels.
VALID_LOG_LEVELS = ("DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN")
_TO_PYTHON = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
              "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}  # fmt: skip
_FROM_PYTHON = {value: name for name, value in _TO_PYTHON.items()}

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_RESERVED = ("timestamp", "level", "logger", "message", "node_id", "exception")


class LoggerLevelError(ValueError):
    """A logger level change Kafka refuses; ``invalid_config`` says which error code applies
    (INVALID_CONFIG when true, INVALID_REQUEST otherwise)."""

    def __init__(self, message: str, *, invalid_config: bool) -> None:
        super().__init__(message)
        self.invalid_config = invalid_config


def record_fields(record: logging.LogRecord) -> Mapping[str, Any]:
    """The structured fields a call passed as ``extra={"fields": {...}}`` (empty when none)."""
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, Mapping) else {}


def _text_value(value: Any) -> str:
    text = str(value)
    if not text or any(c.isspace() or c in '"=' for c in text):
        return json.dumps(text)  # quoted so that k=v pairs stay splittable
    return text


class TextFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger>: <message>`` then `` k=v`` per structured field (values with
    spaces, ``=`` or quotes are JSON-quoted)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = record_fields(record)
        if not fields:
            return text
        first, newline, rest = text.partition("\n")  # keep a traceback below the fields
        pairs = " ".join(f"{key}={_text_value(value)}" for key, value in fields.items())
        return f"{first} {pairs}{newline}{rest}"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``timestamp`` (ISO-8601 UTC, milliseconds, ``Z``), ``level``
    (log4j's names: WARN, FATAL, TRACE...), ``logger``, ``message``, ``node_id``, the structured
    fields as keys, and ``exception`` (the formatted traceback) when the record carries one."""

    def __init__(self, node_id: int | None) -> None:
        super().__init__()
        self.node_id = node_id

    def format(self, record: logging.LogRecord) -> str:
        stamp = dt.datetime.fromtimestamp(record.created, tz=dt.UTC)
        out: dict[str, Any] = {
            "timestamp": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
            "level": level_name(record.levelno),
            "logger": record.name,
            "message": record.getMessage(),
            "node_id": self.node_id,
        }
        for key, value in record_fields(record).items():
            if key not in _RESERVED:
                out[key] = value if isinstance(value, (int, float, bool, str, type(None), list, dict)) else str(value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        return json.dumps(out, ensure_ascii=False, default=str)


def make_formatter(log_format: str, node_id: int | None) -> logging.Formatter:
    """The formatter of ``log.format`` (``text`` or ``json``); ValueError for another value."""
    if log_format == "text":
        return TextFormatter()
    if log_format == "json":
        return JsonFormatter(node_id)
    raise ValueError(f"log.format={log_format!r}: expected text or json")


def level_name(levelno: int) -> str:
    """log4j's name of a Python level (a custom level: the nearest named one below it)."""
    if levelno in _FROM_PYTHON:
        return _FROM_PYTHON[levelno]
    below = [value for value in _FROM_PYTHON if value <= levelno]
    return _FROM_PYTHON[max(below)] if below else "TRACE"


def python_level(name: str) -> int:
    """The Python level of a log4j level name (also Python's WARNING/CRITICAL); ValueError else."""
    upper = name.strip().upper()
    if upper in _TO_PYTHON:
        return _TO_PYTHON[upper]
    if upper in ("WARNING", "CRITICAL"):
        return logging.WARNING if upper == "WARNING" else logging.CRITICAL
    raise ValueError(f"{name!r} is not a log level (one of {', '.join(VALID_LOG_LEVELS)})")


def configure(
    *,
    log_format: str = "text",
    node_id: int | None = None,
    level: str = "INFO",
    logs_dir: str | Path | None = None,
    max_bytes: int = 104857600,
    backup_count: int = 10,
    stream: Any = None,
) -> list[logging.Handler]:
    """Replace the root logger's handlers: stderr (or ``stream``) always, plus the rotating files
    of ``logs_dir`` (module docstring). Sets the root level and Kafka's named loggers' levels.
    Returns the handlers installed (the caller may flush buffered records into them)."""
    formatter = make_formatter(log_format, node_id)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    console = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handlers: list[logging.Handler] = [console]
    root.setLevel(python_level(level))
    for name, default in DEFAULT_LEVELS.items():
        named = logging.getLogger(name)
        named.setLevel(python_level(default))
        for old in list(named.handlers):
            named.removeHandler(old)
            old.close()
        named.propagate = True
    if logs_dir is not None:
        directory = Path(logs_dir)
        directory.mkdir(parents=True, exist_ok=True)

        def rotating(file_name: str) -> logging.Handler:
            return logging.handlers.RotatingFileHandler(
                directory / file_name, maxBytes=max_bytes, backupCount=backup_count, encoding="utf-8"
            )

        handlers.append(rotating(SERVER_LOG))
        for name, file_name in ((STATE_CHANGE_LOGGER, STATE_CHANGE_LOG), (REQUEST_LOGGER, REQUEST_LOG)):
            own = rotating(file_name)
            own.setFormatter(formatter)
            named = logging.getLogger(name)
            named.addHandler(own)
            named.propagate = False  # log4j's additivity: false
    for handler in handlers:
        handler.setFormatter(formatter)
        root.addHandler(handler)
    return handlers


# -- run-time levels (BROKER_LOGGER, KIP-412) ------------------------------------------------------


def describe_loggers() -> dict[str, str]:
    """Every logger this process has created, with its effective level in log4j's names, plus
    ``root`` (as Kafka lists every log4j logger it knows)."""
    out = {ROOT_LOGGER: level_name(logging.getLogger().getEffectiveLevel())}
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):
            out[name] = level_name(logger.getEffectiveLevel())
    return dict(sorted(out.items()))


def _existing(name: str) -> logging.Logger:
    if name == ROOT_LOGGER:
        return logging.getLogger()
    logger = logging.Logger.manager.loggerDict.get(name)
    if not isinstance(logger, logging.Logger):
        raise LoggerLevelError(f"Logger {name} does not exist!", invalid_config=True)
    return logger


def check_level_change(name: str, level: str | None) -> None:
    """Raise LoggerLevelError unless setting ``name`` to ``level`` (None: reset) is allowed:
    the logger must exist; a level must be one of log4j's (upper case, as Kafka's
    ``LogLevelConfig.VALID_LOG_LEVELS``); the root logger cannot be reset."""
    _existing(name)
    if level is None:
        if name == ROOT_LOGGER:
            raise LoggerLevelError(
                f"Removing the log level of the {ROOT_LOGGER} logger is not allowed", invalid_config=False
            )
        return
    if level not in VALID_LOG_LEVELS:
        raise LoggerLevelError(
            f"Cannot set the log level of {name} to {level} as it is not a supported log level. "
            f"Valid log levels are {', '.join(VALID_LOG_LEVELS)}",
            invalid_config=True,
        )


def set_logger_level(name: str, level: str) -> None:
    """SET: ``name`` logs at ``level`` from now on (checked by ``check_level_change``)."""
    check_level_change(name, level)
    _existing(name).setLevel(_TO_PYTHON[level])


def reset_logger_level(name: str) -> None:
    """DELETE: ``name`` goes back to the root logger's level (Kafka's ``unsetLogLevel``)."""
    check_level_change(name, None)
    _existing(name).setLevel(logging.getLogger().getEffectiveLevel())
