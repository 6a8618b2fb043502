"""The storage tool: ``pylog storage`` / ``python -m broker.storage``, Kafka's ``kafka-storage``.

    python -m broker.storage random-uuid
    python -m broker.storage format --config server.properties --cluster-id ID [--ignore-formatted]
        [--release-version V] [--add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]' ...]
        [--feature NAME=LEVEL ...] [--standalone | --no-initial-controllers | --initial-controllers LIST]
    python -m broker.storage info --config server.properties

Flags, outputs, error messages and exit codes are ``kafka-storage``'s (Kafka 4.1's
``kafka.tools.StorageTool`` and ``org.apache.kafka.metadata.storage.Formatter``; the Kafka
documentation "KRaft: Provisioning Nodes"). ``format`` writes ``meta.properties`` and the
bootstrap checkpoint into every ``log.dirs`` entry (``broker.meta_properties``); the first one is
the metadata directory. pylog's own additions: ``--data-dir DIR`` and ``--override KEY=VALUE`` as
``pylog-broker`` takes them (then ``--config`` may be left out), so a node started with those flags
is formatted with the same ones.

What has an effect in pylog (docs/compatibility.md "Storage tool"): ``--cluster-id``,
``--ignore-formatted``, ``--add-scram`` (the credentials the first active controller appends to
the metadata log). ``--release-version`` and ``--feature`` are checked and printed, but pylog
serves one protocol version whatever they say.

KIP-853 dynamic quorum (``controller.quorum.bootstrap.servers`` instead of
``controller.quorum.voters``): ``--standalone`` makes this controller the only voter, with a new
directory id and its controller listener's endpoint; ``--initial-controllers
id@host:port:directoryId,...`` lists the first voters (this node's metadata directory gets the
directory id its entry names); either writes the bootstrap checkpoint
``__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`` (KRaftVersion 1 and the
VotersRecord, ``broker.raft.voters``) into the metadata log dir, as kafka-storage does.
``--no-initial-controllers`` formats a controller that joins later as an observer (then
``pylog metadata-quorum add-controller``) or a broker.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from broker.config import BrokerConfig, ConfigError, parse_listener
from broker.log.manager import METADATA_DIR_NAME
from broker.meta_properties import (
    Bootstrap,
    MetaProperties,
    MetaPropertiesError,
    new_cluster_id,
    read_meta,
    write_bootstrap,
    write_meta,
)
from broker.metadata.records import MetadataRecord, UserScramCredentialRecord
from broker.raft.config import parse_quorum_voters
from broker.raft.log import VoterSpec, VotersRecord
from broker.raft.voters import (
    BOOTSTRAP_CHECKPOINT,
    VotersFileError,
    directory_id_bytes,
    directory_id_text,
    encode_bootstrap_checkpoint,
    parse_initial_controllers,
)
from broker.security.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, credential_from_salted_password, salted_password

# Kafka 4.1's MetadataVersion values (3.3-IV3 is the oldest KRaft can format; 4.2-* are not stable yet)
METADATA_VERSIONS = (
    "3.3-IV3", "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2", "3.6-IV0", "3.6-IV1", "3.6-IV2",
    "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4", "3.8-IV0", "3.9-IV0",
    "4.0-IV0", "4.0-IV1", "4.0-IV2", "4.0-IV3", "4.1-IV0", "4.1-IV1",
)  # fmt: skip
UNSTABLE_METADATA_VERSIONS = ("4.2-IV0", "4.2-IV1")
LATEST_STABLE = METADATA_VERSIONS[-1]
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_KEYS = ("name", "password", "salt", "saltedpassword", "iterations")
KNOWN_FEATURES = (
    "metadata.version", "kraft.version", "transaction.version", "group.version",
    "eligible.leader.replicas.version", "share.version", "streams.version",
)  # fmt: skip


class StorageToolError(Exception):
    """A refusal: its message goes to stderr as one line, exit code 1."""


def release_version(text: str) -> str:
    """``--release-version``: ``X.Y-IVn`` or ``X.Y`` (its latest ``IV``), as Kafka parses it."""
    if text in UNSTABLE_METADATA_VERSIONS:
        raise StorageToolError(f"metadata.version {text} is not yet stable.")
    matches = [v for v in METADATA_VERSIONS if v == text or v.split("-")[0] == text]
    if not matches:
        raise StorageToolError(
            f"Version {text} is not a valid version. The minimum version is {METADATA_VERSIONS[0]} "
            f"and the maximum version is {UNSTABLE_METADATA_VERSIONS[-1]}"
        )
    return matches[-1]


@dataclass(frozen=True)
class ScramCredential:
    name: str
    mechanism: str
    salt: bytes
    salted_password: bytes
    iterations: int

    def record(self) -> UserScramCredentialRecord:
        c = credential_from_salted_password(self.mechanism, self.salt, self.salted_password, self.iterations)
        return UserScramCredentialRecord(
            self.name, self.mechanism, c.salt.hex(), c.stored_key.hex(), c.server_key.hex(), c.iterations
        )


def _b64(key: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise StorageToolError(f"The '{key}' value of add-scram is not valid base64: {value}") from None


def parse_scram(argument: str, random_bytes: int = 32) -> ScramCredential:
    """One ``--add-scram`` argument, Kafka's syntax and messages (``ScramParser``):
    ``SCRAM-SHA-256=[name=alice,password=alice-secret]`` or
    ``SCRAM-SHA-512=[name=alice,iterations=8192,salt="N3E=",saltedpassword="YCE="]``
    (salt and salted password base64; iterations 4096 by default; a random salt by default)."""
    mechanism, sep, config = argument.partition("=")
    if not sep:
        raise StorageToolError(f"Failed to find equals sign in SCRAM argument '{argument}'")
    if mechanism not in SCRAM_MECHANISMS:
        raise StorageToolError(f"The add-scram mechanism {mechanism} is not supported.")
    if not config.startswith("["):
        raise StorageToolError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise StorageToolError("Expected configuration string to end with ]")
    values: dict[str, str] = {}
    for item in filter(None, config[1:-1].split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise StorageToolError(f"Failed to find equals sign in SCRAM configuration '{item}'")
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        values[key.strip()] = value
    if "name" not in values:
        raise StorageToolError("You must supply 'name' to add-scram")
    if "password" not in values and "saltedpassword" not in values:
        raise StorageToolError("You must supply one of 'password' or 'saltedpassword' to add-scram")
    unknown = sorted(k for k in values if k not in SCRAM_KEYS)
    if unknown:
        raise StorageToolError(f"Unknown SCRAM configurations: {', '.join(unknown)}")
    underscored = mechanism.replace("-", "_")
    try:
        iterations = int(values.get("iterations", MIN_ITERATIONS))
    except ValueError:
        raise StorageToolError(f"The 'iterations' value of add-scram is not a number: {values['iterations']}") from None
    if iterations < MIN_ITERATIONS:
        raise StorageToolError(f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using {underscored}")
    if iterations > MAX_ITERATIONS:
        raise StorageToolError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using {underscored}")
    if "saltedpassword" in values:
        if "salt" not in values:
            raise StorageToolError("You must supply 'salt' with 'saltedpassword' to add-scram")
        salt = _b64("salt", values["salt"])
        return ScramCredential(values["name"], mechanism, salt, _b64("saltedpassword", values["saltedpassword"]),
                               iterations)  # fmt: skip
    salt = _b64("salt", values["salt"]) if "salt" in values else os.urandom(random_bytes)
    return ScramCredential(
        values["name"], mechanism, salt, salted_password(mechanism, values["password"], salt, iterations), iterations
    )


def _voters_flag(args: argparse.Namespace) -> str | None:
    if args.standalone:
        return "--standalone"
    if args.initial_controllers is not None:
        return "--initial-controllers"
    if args.no_initial_controllers:
        return "--no-initial-controllers"
    return None


def _check_quorum_flags(args: argparse.Namespace, config: BrokerConfig) -> None:
    """Kafka's rules for the quorum flags, then pylog's limits (no dynamic quorum)."""
    voters = parse_quorum_voters(str(config["controller.quorum.voters"]))
    controller = config.kraft_enabled and "controller" in config["process.roles"]
    flag = _voters_flag(args)
    if args.initial_controllers is not None:
        try:
            parse_initial_controllers(args.initial_controllers)
        except VotersFileError as exc:
            raise StorageToolError(str(exc)) from None
    if voters and flag in ("--standalone", "--initial-controllers"):
        raise StorageToolError(
            "You cannot specify controller.quorum.voters and format the node with --initial-controllers or "
            "--standalone. If you want to use dynamic quorum, please remove controller.quorum.voters and specify "
            "controller.quorum.bootstrap.servers instead."
        )
    if not controller or voters:
        if flag == "--standalone" and not controller:
            raise StorageToolError("You can only use --standalone on a controller.")
        return
    if flag is None:
        raise StorageToolError(
            "Because controller.quorum.voters is not set on this controller, you must specify one of the following: "
            "--standalone, --initial-controllers, or --no-initial-controllers."
        )


def _controller_endpoint(config: BrokerConfig) -> tuple[str, int]:
    """This controller's endpoint for the VotersRecord (``--standalone``): its first controller
    listener (advertised address if any; the first listener without ``controller.listener.names``)."""
    specs = [parse_listener(uri) for uri in config["listeners"]]
    advertised = {a.name: a for a in map(parse_listener, config["advertised.listeners"])}
    chosen = next((x for x in specs if x.name in config.controller_listeners), specs[0] if specs else None)
    if chosen is None:
        raise StorageToolError("--standalone needs a controller listener in listeners")
    shown = advertised.get(chosen.name, chosen)
    host = shown.host if shown.host not in ("", "0.0.0.0", "::") else "localhost"
    return host, shown.port


def _bootstrap_voters(args: argparse.Namespace, config: BrokerConfig, directory_id: str) -> VotersRecord | None:
    """The first voter set ``--standalone`` / ``--initial-controllers`` describe (None otherwise)."""
    if args.standalone:
        host, port = _controller_endpoint(config)
        return VotersRecord((VoterSpec(config.node_id, directory_id_bytes(directory_id), host, port),))
    if args.initial_controllers is not None:
        try:
            return parse_initial_controllers(args.initial_controllers)
        except VotersFileError as exc:
            raise StorageToolError(str(exc)) from None
    return None


def _write_checkpoint(directory: Path, voters: VotersRecord) -> None:
    """The bootstrap checkpoint, atomically (``.part``, fsync, rename, fsync of the directory)."""
    metadata = directory / METADATA_DIR_NAME
    metadata.mkdir(parents=True, exist_ok=True)
    path = metadata / BOOTSTRAP_CHECKPOINT
    part = path.with_name(path.name + ".part")
    with open(part, "wb") as f:
        f.write(encode_bootstrap_checkpoint(voters, int(time.time() * 1000)))
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)
    fd = os.open(metadata, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_features(features: Sequence[str]) -> None:
    for feature in features:
        name, eq, level = feature.partition("=")
        if not eq or not level.strip().lstrip("-").isdigit():
            raise StorageToolError(f"Can't parse feature={feature}. The format must be feature=level.")
        if name.strip() not in KNOWN_FEATURES:
            raise StorageToolError(f"Unsupported feature: {name.strip()}.")


def run_format(args: argparse.Namespace, out: list[str]) -> int:
    """``format``: append the lines to print to ``out``; raise StorageToolError to refuse."""
    config = _load_config(args)
    version = release_version(args.release_version) if args.release_version else LATEST_STABLE
    _check_features(args.feature)
    _check_quorum_flags(args, config)
    configured = str(config["cluster.id"])
    if configured and configured != args.cluster_id:
        raise StorageToolError(
            f"--cluster-id {args.cluster_id} differs from cluster.id={configured} in the configuration"
        )
    records: list[MetadataRecord] = [parse_scram(s).record() for s in args.add_scram]
    node_id = config.node_id
    unformatted = []
    for d in config.log_dirs:
        meta = read_meta(d)
        if meta is None:
            unformatted.append(d)
            continue
        if not args.ignore_formatted:
            raise StorageToolError(
                f"Log directory {d} is already formatted. Use --ignore-formatted to ignore this directory and "
                "format the others."
            )
        if meta.cluster_id != args.cluster_id:
            raise StorageToolError(
                f"Invalid cluster.id in: {Path(d) / 'meta.properties'}. Expected {args.cluster_id}, "
                f"but read {meta.cluster_id}"
            )
        if meta.node_id != node_id:
            raise StorageToolError(
                f"Stored node id {meta.node_id} doesn't match previous node id {node_id} in "
                f"{Path(d) / 'meta.properties'}. If you moved your data, make sure your configured node id "
                "matches. If you intend to create a new node, you should remove all data in your data directories."
            )
    if not unformatted:
        out.append("All of the log directories are already formatted.")
        return 0
    bootstrap = Bootstrap(version, tuple(records))
    metadata_dir = config.log_dirs[0]
    metadata_directory_id = new_cluster_id()
    voters = _bootstrap_voters(args, config, metadata_directory_id)
    own = voters.spec(node_id) if voters is not None else None
    if own is not None:  # --initial-controllers names this node's directory id
        metadata_directory_id = directory_id_text(own.directory_id)
    for d in unformatted:
        try:
            Path(d).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageToolError(f"Unable to create storage directory {d}: {exc}") from None
        if d != metadata_dir:
            kind = "data directory"
        elif own is not None:
            kind = "dynamic metadata voter directory"
        else:
            kind = "metadata directory"
        out.append(f"Formatting {kind} {d} with metadata.version {version}.")
        write_bootstrap(d, bootstrap)
        if d == metadata_dir and voters is not None:
            _write_checkpoint(Path(d), voters)
        directory_id = metadata_directory_id if d == metadata_dir else new_cluster_id()
        write_meta(d, MetaProperties(args.cluster_id, node_id, directory_id))
    return 0


def run_info(args: argparse.Namespace, out: list[str]) -> int:
    """``info``: the log dirs, the metadata they agree on, and the problems; exit 1 with a problem."""
    config = _load_config(args)
    found, problems = [], []
    metas: dict[str, MetaProperties] = {}
    for d in config.log_dirs:
        if not Path(d).is_dir():
            problems.append(f"{d} does not exist" if not Path(d).exists() else f"{d} is not a directory")
            continue
        found.append(d)
        try:
            meta = read_meta(d)
        except MetaPropertiesError as exc:
            problems.append(str(exc))
            continue
        if meta is None:
            problems.append(f"{d} is not formatted.")
        else:
            metas[d] = meta
    if len({m.node_id for m in metas.values()}) > 1:
        problems.append("Mismatched node IDs between storage directories.")
    if len({m.cluster_id for m in metas.values()}) > 1:
        problems.append("Mismatched cluster IDs between storage directories.")
    if found:
        out.append("Found log director" + ("ies:" if len(found) > 1 else "y:"))
        out.extend(f"  {d}" for d in found)
        out.append("")
    if metas:
        out.append(f"Found metadata: {next(iter(metas.values())).describe()}")
        out.append("")
    if problems:
        out.append("Found problem" + ("s:" if len(problems) > 1 else ":"))
        out.extend(f"  {p}" for p in problems)
        out.append("")
    return 1 if problems else 0


def _load_config(args: argparse.Namespace) -> BrokerConfig:
    overrides = dict(args.override)
    if args.data_dir:
        overrides.setdefault("log.dirs", args.data_dir)
    if args.config is None and not overrides:
        raise _usage("argument --config/-c is required")
    try:
        return BrokerConfig.load(args.config, overrides)
    except (ConfigError, OSError) as exc:
        raise StorageToolError(str(exc)) from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _usage(message)


class _UsageError(Exception):
    pass


def _usage(message: str) -> _UsageError:
    return _UsageError(message)


def _override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--override {text!r} is not key=value")
    return key.strip(), value.strip()


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", help="The server.properties file to use (Kafka's key names).")
    parser.add_argument("--override", action="append", default=[], type=_override, metavar="KEY=VALUE",
                        help="pylog: set one config key, as pylog-broker --override (repeatable)")  # fmt: skip
    parser.add_argument("--data-dir", help="pylog: shorthand for --override log.dirs=DIR, as pylog-broker takes it")


def add_format_flags(parser: argparse.ArgumentParser) -> None:
    """``format``'s flags as kafka-storage names them (``pyspark_log.cli.storage`` mirrors them)."""
    add_config_flags(parser)
    parser.add_argument("--cluster-id", "-t", required=True, help="The cluster ID to use.")
    parser.add_argument("--add-scram", "-S", action="append", default=[], metavar="ADD_SCRAM",
                        help="A SCRAM_CREDENTIAL to add to the __cluster_metadata log e.g. "
                             "'SCRAM-SHA-256=[name=alice,password=alice-secret]'")  # fmt: skip
    parser.add_argument("--ignore-formatted", "-g", action="store_true",
                        help="Skip over already formatted directories rather than failing.")  # fmt: skip
    parser.add_argument("--release-version", "-r", help=f"The release version (default {LATEST_STABLE}).")
    parser.add_argument("--feature", "-f", action="append", default=[], help="feature=level (checked only)")
    quorum = parser.add_mutually_exclusive_group()
    quorum.add_argument("--standalone", "-s", action="store_true", help="A single-node quorum of this controller.")
    quorum.add_argument("--no-initial-controllers", "-N", action="store_true",
                        help="A controller that joins a dynamic quorum later, or a static one.")  # fmt: skip
    quorum.add_argument("--initial-controllers", "-I",
                        help="The first voters of a dynamic quorum: id@host:port:directoryId,...")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pylog storage", description="The pylog storage tool (Kafka's kafka-storage).")
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    add_format_flags(verbs.add_parser("format", help="Format the log directories on this node."))
    add_config_flags(verbs.add_parser("info", help="Get information about the log directories on this node."))
    verbs.add_parser("random-uuid", help="Print a random UUID.")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes: 0 done, 1 refused (one line on stderr; ``info``: a problem found), 2 usage."""
    # the config's warnings about unknown keys are not this tool's output; the switch is
    # process-wide, so it is put back (an in-process caller keeps its logging)
    logging.disable(logging.WARNING)
    try:
        return _run(argv)
    finally:
        logging.disable(logging.NOTSET)


def _run(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except _UsageError as exc:
        print(f"pylog storage: {exc}", file=sys.stderr)
        return 2
    out: list[str] = []
    try:
        if args.verb == "random-uuid":
            out.append(new_cluster_id())
            code = 0
        elif args.verb == "format":
            code = run_format(args, out)
        else:
            code = run_info(args, out)
    except _UsageError as exc:
        print(f"pylog storage: {exc}", file=sys.stderr)
        return 2
    except (StorageToolError, MetaPropertiesError) as exc:
        print("\n".join(out), end="\n" if out else "")
        print(str(exc), file=sys.stderr)
        return 1
    print("\n".join(out))
    return code


if __name__ == "__main__":
    sys.exit(main())
