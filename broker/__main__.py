"""``pylog-broker`` / ``python -m broker``: start one broker.

pylog-broker --data-dir /tmp/x                      # defaults: 127.0.0.1:9092, one node
pylog-broker --config server.properties --override log.retention.ms=60000
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import logging.handlers
import sys

from broker.config import BrokerConfig, ConfigError
from broker.logging_setup import configure, python_level


def _parse_override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--override {text!r} is not key=value (e.g. log.retention.ms=60000)")
    return key.strip(), value.strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pylog-broker", description="Start a Kafka-compatible pylog broker.")
    parser.add_argument("--config", help="a server.properties file (Kafka's key names)")
    parser.add_argument(
        "--override", action="append", default=[], type=_parse_override, metavar="KEY=VALUE",
        help="set one config key (repeatable); wins over --config",
    )  # fmt: skip
    parser.add_argument("--data-dir", help="shorthand for --override log.dirs=DIR")
    parser.add_argument("--log-level", default="INFO", help="root logging level (TRACE, DEBUG, INFO, WARN, ERROR)")
    return parser


def _take(early: logging.handlers.MemoryHandler) -> list[logging.LogRecord]:
    """The records buffered during start-up; the buffer leaves the root logger."""
    logging.getLogger().removeHandler(early)
    records = list(early.buffer)
    early.buffer.clear()
    return records


def _replay(records: list[logging.LogRecord]) -> None:
    """Hand buffered records to the handlers ``configure`` installed."""
    for record in records:
        logging.getLogger(record.name).handle(record)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        python_level(args.log_level)
    except ValueError as exc:
        print(f"pylog-broker: --log-level: {exc}", file=sys.stderr)
        return 2
    # Records logged while the config loads wait here until log.format and the files are known.
    early = logging.handlers.MemoryHandler(capacity=100_000, flushLevel=logging.CRITICAL + 1)
    logging.getLogger().addHandler(early)
    logging.getLogger().setLevel(python_level(args.log_level))
    overrides = dict(args.override)
    if args.data_dir:
        overrides.setdefault("log.dirs", args.data_dir)
    try:
        config = BrokerConfig.load(args.config, overrides)
    except (ConfigError, OSError) as exc:
        records = _take(early)
        configure(level=args.log_level)
        _replay(records)
        print(f"pylog-broker: {exc}", file=sys.stderr)
        return 2
    records = _take(early)
    try:
        configure(
            log_format=config["log.format"],
            node_id=config.node_id,
            level=args.log_level,
            logs_dir=config.get("kafka.logs.dir"),
            max_bytes=config["log.file.max.bytes"],
            backup_count=config["log.file.backup.count"],
        )
    except OSError as exc:
        configure(level=args.log_level)
        _replay(records)
        print(f"pylog-broker: kafka.logs.dir={config.get('kafka.logs.dir')}: {exc}", file=sys.stderr)
        return 2
    _replay(records)
    from broker.server import run

    try:
        return asyncio.run(run(config))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
