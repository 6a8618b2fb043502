"""``pylog storage format | info | random-uuid``: Kafka's ``kafka-storage`` (``kafka.tools.StorageTool``).

A node refuses to start on log dirs that were never formatted (as Kafka 4.x does), so a new node
is formatted first, with the same configuration it will run with::

    pylog storage random-uuid                                    # a cluster id, once per cluster
    pylog storage format --config server.properties --cluster-id <id> \\
        [--add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'] [--ignore-formatted]
    pylog storage info --config server.properties

Flags, output and exit codes are kafka-storage's: ``--config/-c``, ``--cluster-id/-t``,
``--ignore-formatted/-g``, ``--release-version/-r``, ``--feature/-f``, ``--add-scram/-S``,
``--standalone/-s``, ``--no-initial-controllers/-N``, ``--initial-controllers/-I``; besides
``--config``, pylog takes the broker's ``--data-dir`` and ``--override KEY=VALUE``. The work is
done by the broker package's tool (``python -m broker.storage``: the files it writes are the
broker's), run as a child process of this interpreter — the client package never imports the
broker. Which flags have an effect in pylog: docs/compatibility.md "Storage tool".
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.embedded import random_cluster_id


def _config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", help="The server.properties file to use (Kafka's key names).")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set one config key, as pylog-broker --override (repeatable)")  # fmt: skip
    parser.add_argument("--data-dir", help="shorthand for --override log.dirs=DIR, as pylog-broker takes it")


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    storage = commands.add_parser(
        "storage", help="format and inspect log directories (kafka-storage)", parents=[common],
        description="The storage tool: format a node's log directories before its first start (kafka-storage).",
    )  # fmt: skip
    verbs = storage.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("format", help="Format the log directories on this node.", parents=[common])
    _config_flags(p)
    p.add_argument("--cluster-id", "-t", required=True, help="The cluster ID to use (pylog storage random-uuid).")
    p.add_argument("--add-scram", "-S", action="append", default=[], metavar="ADD_SCRAM",
                   help="A SCRAM_CREDENTIAL to add to the __cluster_metadata log e.g. "
                        "'SCRAM-SHA-256=[name=alice,password=alice-secret]' "
                        "'SCRAM-SHA-512=[name=alice,iterations=8192,salt=\"N3E=\",saltedpassword=\"YCE=\"]'",
                   )  # fmt: skip
    p.add_argument("--ignore-formatted", "-g", action="store_true",
                   help="Skip over already formatted directories rather than failing.")  # fmt: skip
    p.add_argument("--release-version", "-r",
                   help="The release version for the initial feature settings "
                        "(3.3-IV3 .. 4.1-IV1; checked, pylog serves one version).")  # fmt: skip
    p.add_argument("--feature", "-f", action="append", default=[], help="feature=level (checked only)")
    quorum = p.add_mutually_exclusive_group()
    quorum.add_argument("--standalone", "-s", action="store_true",
                        help="Used to initialize a controller as a single-node dynamic quorum (KIP-853).")  # fmt: skip
    quorum.add_argument("--no-initial-controllers", "-N", action="store_true",
                        help="A controller that joins a dynamic quorum later (then metadata-quorum "
                             "add-controller), or one of a static quorum.")  # fmt: skip
    quorum.add_argument("--initial-controllers", "-I", metavar="INITIAL_CONTROLLERS",
                        help="The first voters of a dynamic quorum: id@host:port:directoryId,... "
                             "(directory ids from pylog storage random-uuid)")  # fmt: skip
    p.set_defaults(handler=run_format)
    p = verbs.add_parser("info", help="Get information about the log directories on this node.", parents=[common])
    _config_flags(p)
    p.set_defaults(handler=run_info)
    p = verbs.add_parser("random-uuid", help="Print a random UUID.", parents=[common])
    p.set_defaults(handler=random_uuid)


def _config_args(args: argparse.Namespace) -> list[str]:
    out = ["--config", args.config] if args.config else []
    out += ["--data-dir", args.data_dir] if args.data_dir else []
    for item in args.override:
        out += ["--override", item]
    return out


def _run(argv: list[str]) -> int:
    """``python -m broker.storage`` with ``argv``; its output is this command's."""
    sys.stdout.flush()
    return subprocess.run([sys.executable, "-m", "broker.storage", *argv], check=False).returncode


def run_format(args: argparse.Namespace, ctx: Context) -> int:
    argv = ["format", *_config_args(args), "--cluster-id", args.cluster_id]
    for scram in args.add_scram:
        argv += ["--add-scram", scram]
    for feature in args.feature:
        argv += ["--feature", feature]
    if args.ignore_formatted:
        argv.append("--ignore-formatted")
    if args.release_version:
        argv += ["--release-version", args.release_version]
    if args.standalone:
        argv.append("--standalone")
    if args.no_initial_controllers:
        argv.append("--no-initial-controllers")
    if args.initial_controllers is not None:
        argv += ["--initial-controllers", args.initial_controllers]
    return _run(argv)


def run_info(args: argparse.Namespace, ctx: Context) -> int:
    return _run(["info", *_config_args(args)])


def random_uuid(args: argparse.Namespace, ctx: Context) -> int:
    ctx.output.line(random_cluster_id())
    return 0
