"""The ``pylog`` command line: the parser, the dispatch, and the one-line error contract.

Each command module (``topics``, ``produce``, ``consume``, ``offsets``, ``groups``, ``cluster``,
``configs``)
registers its sub-parser and a handler ``(args, ctx) -> exit code``; ``metadata-quorum``
(``metadata_quorum``), ``leader-election`` (``leader_election``), ``log-dirs`` (``log_dirs``),
``transactions``, ``delete-records`` and ``storage`` (``kafka-storage``) too. The options every
command shares (``--bootstrap-server``, ``--command-config``, ``--output``, ``--debug``) are
accepted before the command or after it, as Kafka's tools take them after.

Exit codes: 0 done, 1 the operation failed, 2 the command line (or a config file) is wrong,
130 interrupted. A failure prints exactly one line on stderr, ``pylog: <what> (<KAFKA_ERROR>)``;
``--debug`` adds the traceback and the client's debug log.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

from pyspark_log import __version__
from pyspark_log.cli import (
    acls,
    cluster,
    configs,
    consume,
    delete_records,
    groups,
    leader_election,
    log_dirs,
    metadata_quorum,
    offsets,
    perf,
    produce,
    reassign_partitions,
    share_groups,
    storage,
    topics,
    transactions,
    users,
)
from pyspark_log.cli.context import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, Context
from pyspark_log.cli.errors import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    UsageError,
    config_error,
    kafka_error,
)
from pyspark_log.cli.output import MODES, Output, resolve_mode
from pyspark_log.client.errors import ConfigError, KafkaError

COMMANDS = (
    topics,
    produce,
    consume,
    offsets,
    groups,
    share_groups,
    cluster,
    metadata_quorum,
    leader_election,
    reassign_partitions,
    log_dirs,
    transactions,
    delete_records,
    configs,
    users,
    acls,
    perf,
    storage,
)

_LOGGERS = ("pyspark_log", "asyncio")


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are ``UsageError`` (one line, exit 2) instead of usage + exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _add_common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """The shared options; on sub-parsers their defaults are suppressed so a value given before
    the command is not overwritten by the sub-parser's default."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    group = parser.add_argument_group("common options")
    group.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        default=default(None),
        help=f"broker(s) to bootstrap from, comma-separated (env {BOOTSTRAP_ENV}; default {DEFAULT_BOOTSTRAP})",
    )
    group.add_argument(
        "--command-config",
        metavar="FILE",
        default=default(None),
        help="a .properties file of client configs (Kafka key names)",
    )
    group.add_argument(
        "--output",
        choices=MODES,
        default=default(None),
        help="table (default on a terminal), text (default otherwise) or json",
    )
    group.add_argument(
        "--debug", action="store_true", default=default(False), help="show tracebacks and the client's debug log"
    )


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    _add_common(common, suppress=True)
    parser = _Parser(
        prog="pylog",
        description="Administer, produce to and consume from a pylog (or any Kafka) cluster.",
    )
    _add_common(parser, suppress=False)
    parser.add_argument("--version", action="version", version=f"pylog {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.register(commands, common)
    return parser


def _configure_logging(debug: bool) -> None:
    if debug:
        logging.basicConfig(
            level=logging.DEBUG, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        return
    for name in _LOGGERS:  # the client's warnings are not the CLI's output; failures reach the user as errors
        logger = logging.getLogger(name)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


def _fail(message: str, code: int, debug: bool) -> int:
    if debug:
        traceback.print_exc()
    print(f"pylog: {message}", file=sys.stderr)
    return code


def _silence_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``pylog`` command; returns the exit code (the console script exits with it)."""
    arg_list = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(arg_list)
    except UsageError as exc:
        return _fail(str(exc), exc.exit_code, False)
    debug = bool(args.debug)
    _configure_logging(debug)
    try:
        output = Output(resolve_mode(args.output, sys.stdout), sys.stdout)
        ctx = Context.build(args.bootstrap_server, args.command_config, output, debug=debug)
        code: int = args.handler(args, ctx)
        sys.stdout.flush()
        return code
    except CliError as exc:
        return _fail(str(exc), exc.exit_code, debug)
    except ConfigError as exc:
        return _fail(str(config_error(exc)), EXIT_USAGE, debug)
    except KafkaError as exc:
        return _fail(str(kafka_error(exc)), EXIT_ERROR, debug)
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, no traceback
        return _fail(f"internal error: {exc!r} (run with --debug for the traceback)", EXIT_ERROR, debug)
