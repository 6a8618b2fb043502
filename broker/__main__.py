"""``pylog-broker`` / ``python -m broker``: start one broker.

pylog-broker --data-dir /tmp/x                      # defaults: 127.0.0.1:9092, one node
pylog-broker --config server.properties --override log.retention.ms=60000
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from broker.config import BrokerConfig, ConfigError


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
    parser.add_argument("--log-level", default="INFO", help="logging level (DEBUG, INFO, WARNING)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    overrides = dict(args.override)
    if args.data_dir:
        overrides.setdefault("log.dirs", args.data_dir)
    try:
        config = BrokerConfig.load(args.config, overrides)
    except (ConfigError, OSError) as exc:
        print(f"pylog-broker: {exc}", file=sys.stderr)
        return 2
    from broker.server import run

    try:
        return asyncio.run(run(config))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
