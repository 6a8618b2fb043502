"""``pylog reassign-partitions`` (Kafka's ``kafka-reassign-partitions``): move partitions to other
brokers (KIP-455), with the Kafka tool's flags, JSON files and output lines.

Actions (exactly one):

* ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: print the current assignment
  of the topics in ``F`` (``{"version": 1, "topics": [{"topic": "t"}]}``) and a proposed one that
  spreads each partition's replicas (same replication factor) over the listed brokers, round
  robin. Nothing moves. (Kafka's proposal starts at a random broker; this one is deterministic.)
* ``--execute --reassignment-json-file F``: start the moves of ``F``
  (``{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3],
  "log_dirs": ["any", ...]}]}``; ``log_dirs`` optional), after printing the current assignment
  to keep for a rollback. Refused while other moves are in progress unless ``--additional`` is
  given, as Kafka's tool does. A ``log_dirs`` entry other than ``"any"`` (an absolute path) moves
  that replica to that log dir of its broker (AlterReplicaLogDirs, KIP-113), retried while the
  broker does not host the replica yet, for at most ``--timeout`` ms.
* ``--verify --reassignment-json-file F``: per partition ``is completed.`` / ``is still in
  progress.``, per replica moved between log dirs ``completed successfully.`` / ``is still in
  progress.``; exit code 1 while any is in progress.
* ``--cancel --reassignment-json-file F``: cancel the moves of ``F`` still in progress (the
  partitions go back to their original replicas).
* ``--list``: the moves in progress (``Current partition reassignments:``).

``--throttle R`` (bytes/s) with ``--execute`` throttles the moves' replication and ``--verify``
removes the throttles once the moves completed (unless ``--preserve-throttles``); see
``reassign_throttles``. Output lines are Kafka 4.1's.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark_log.cli import reassign_throttles as throttles
from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, UsageError
from pyspark_log.cli.progress import progress_bar
from pyspark_log.client import KafkaError, TopicPartition
from pyspark_log.client.admin import AlterConfigOp, AlterOp, ConfigResource, ResourceType
from pyspark_log.client.errors import ErrorCode

ACTIONS = ("generate", "execute", "verify", "cancel", "list")
Assignment = dict[TopicPartition, list[int]]
LogDirMoves = dict[tuple[str, int, int], str]  # (topic, partition, broker) -> absolute log dir
RETRY_S = 0.1  # AlterReplicaLogDirs answered REPLICA_NOT_AVAILABLE: asked again after this


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "reassign-partitions", help="move partitions to other brokers (kafka-reassign-partitions)", parents=[common]
    )
    p.add_argument("--generate", action="store_true", help="propose an assignment on --broker-list")
    p.add_argument("--execute", action="store_true", help="start the moves of --reassignment-json-file")
    p.add_argument("--verify", action="store_true", help="whether the moves of --reassignment-json-file completed")
    p.add_argument("--cancel", action="store_true", help="cancel the moves of --reassignment-json-file")
    p.add_argument("--list", action="store_true", help="list the moves in progress")
    p.add_argument("--reassignment-json-file", metavar="F", help='{"version":1,"partitions":[{"topic":...}]}')
    p.add_argument("--topics-to-move-json-file", metavar="F", help='{"version":1,"topics":[{"topic":"t"}]}')
    p.add_argument("--broker-list", metavar="1,2,3", help="the brokers --generate places replicas on")
    p.add_argument("--additional", action="store_true", help="--execute while other moves are in progress")
    p.add_argument("--throttle", type=int, default=-1, metavar="B/s", help="bound the moves' replication (bytes/s)")
    p.add_argument(
        "--replica-alter-log-dirs-throttle", type=int, default=-1, metavar="B/s",
        help="bound moves between a broker's log dirs (bytes/s; stored, see docs/compatibility.md)",
    )  # fmt: skip
    p.add_argument("--preserve-throttles", action="store_true", help="--verify leaves the throttles in place")
    p.add_argument(
        "--timeout", type=int, default=10_000, metavar="MS",
        help="how long --execute retries moving replicas to their log_dirs while a broker does not host them yet",
    )  # fmt: skip
    p.set_defaults(handler=run)


def _read(path: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    except ValueError:
        raise UsageError(f"{path}: The input string is not a valid JSON") from None


def parse_reassignment(doc: Any, source: str) -> Assignment:
    """kafka-reassign-partitions' reassignment file, validated with the Kafka tool's messages."""
    try:
        items = doc["partitions"]
        plan: Assignment = {}
        duplicates = []
        for item in items:
            tp = TopicPartition(str(item["topic"]), int(item["partition"]))
            replicas = [int(b) for b in item["replicas"]]
            dirs = item.get("log_dirs")
            if dirs is not None and len(dirs) != len(replicas):
                raise UsageError(f"{source}: the log_dirs of {tp} must name one dir per replica")
            if tp in plan:
                duplicates.append(str(tp))
            plan[tp] = replicas
    except (TypeError, KeyError, ValueError) as exc:
        raise UsageError(f"{source}: not a reassignment file ({exc!r})") from None
    if not plan:
        raise UsageError("Partition reassignment list cannot be empty")
    if duplicates:
        raise UsageError(f"Partition reassignment contains duplicate topic partitions: {', '.join(duplicates)}")
    for tp, replicas in plan.items():
        if not replicas:
            raise UsageError("Partition replica list cannot be empty")
        if len(set(replicas)) != len(replicas):
            raise UsageError(f"Partition replica lists may not contain duplicate entries: {tp}")
    return plan


def parse_log_dirs(doc: Any) -> LogDirMoves:
    """The replicas of a (validated) reassignment file whose ``log_dirs`` entry names a dir."""
    moves: LogDirMoves = {}
    for item in doc["partitions"]:
        for broker, path in zip(item["replicas"], item.get("log_dirs") or (), strict=False):
            if path == "any":
                continue
            if not isinstance(path, str) or not path.startswith("/"):
                raise UsageError(f'log_dirs entries must be "any" or an absolute path, not {path!r}')
            moves[(str(item["topic"]), int(item["partition"]), int(broker))] = path
    return moves


def assignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's reassignment JSON, compact, partitions in topic/partition order."""
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas), "log_dirs": ["any"] * len(replicas)}
        for tp, replicas in sorted(assignment.items(), key=lambda kv: (kv[0].topic, kv[0].partition))
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def propose(current: Mapping[TopicPartition, Sequence[int]], brokers: Sequence[int]) -> Assignment:
    """Each partition's replicas (same count, at most the brokers') on ``brokers``, round robin:
    partition ``p`` of a topic starts at broker ``p mod n`` (rack-unaware)."""
    out: Assignment = {}
    n = len(brokers)
    for tp, replicas in sorted(current.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        count = min(len(replicas), n)
        out[tp] = [brokers[(tp.partition + i) % n] for i in range(count)]
    return out


def _current(ctx: Context, topics: Sequence[str]) -> Assignment:
    with ctx.admin() as admin:
        described = admin.describe_topics(list(dict.fromkeys(topics)))
    return {
        TopicPartition(name, p.partition): list(p.replicas)
        for name, meta in described.items()
        for p in meta.partitions.values()
    }


def _plural(items: Sequence[Any]) -> str:
    return "s" if len(items) > 1 else ""


def run(args: argparse.Namespace, ctx: Context) -> int:
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        raise UsageError(f"Command must include exactly one action: {', '.join('--' + a for a in ACTIONS)}")
    action = chosen[0]
    if action in ("execute", "verify", "cancel") and args.reassignment_json_file is None:
        raise UsageError(f"--{action} needs --reassignment-json-file")
    if action == "generate":
        return _generate(args, ctx)
    if action == "list":
        return _list(ctx)
    doc = _read(args.reassignment_json_file)
    plan = parse_reassignment(doc, args.reassignment_json_file)
    moves = parse_log_dirs(doc)
    if action == "execute":
        return _execute(
            ctx, plan, additional=bool(args.additional), throttle=args.throttle,
            log_dir_throttle=args.replica_alter_log_dirs_throttle, moves=moves, timeout_ms=args.timeout,
        )  # fmt: skip
    if action == "verify":
        return _verify(ctx, plan, preserve_throttles=bool(args.preserve_throttles), moves=moves)
    return _cancel(ctx, plan)


def _generate(args: argparse.Namespace, ctx: Context) -> int:
    if args.topics_to_move_json_file is None or args.broker_list is None:
        raise UsageError("--generate needs --topics-to-move-json-file and --broker-list")
    try:
        brokers = [int(b) for b in str(args.broker_list).split(",") if b.strip()]
    except ValueError:
        raise UsageError(f"--broker-list must be broker ids like 1,2,3, not {args.broker_list!r}") from None
    if len(set(brokers)) != len(brokers):
        raise UsageError(f"Broker list contains duplicate entries: {args.broker_list}")
    if not brokers:
        raise UsageError("--broker-list is empty")
    doc = _read(args.topics_to_move_json_file)
    try:
        topics = [str(item["topic"]) for item in doc["topics"]]
    except (TypeError, KeyError) as exc:
        raise UsageError(f"{args.topics_to_move_json_file}: not a topics-to-move file ({exc!r})") from None
    if len(set(topics)) != len(topics):
        raise UsageError(f"List of topics to reassign contains duplicate entries: {', '.join(topics)}")
    current = _current(ctx, topics)
    proposed = propose(current, brokers)
    if ctx.output.is_json:
        ctx.output.json(
            {"current": json.loads(assignment_json(current)), "proposed": json.loads(assignment_json(proposed))}
        )
        return 0
    ctx.output.lines(
        ["Current partition replica assignment", assignment_json(current), "",
         "Proposed partition reassignment configuration", assignment_json(proposed)]
    )  # fmt: skip
    return 0


def _execute(
    ctx: Context, plan: Assignment, *, additional: bool, throttle: int = -1, log_dir_throttle: int = -1,
    moves: LogDirMoves | None = None, timeout_ms: int = 10_000,
) -> int:  # fmt: skip
    with ctx.admin() as admin:
        if not additional and admin.list_partition_reassignments():
            raise CliError(
                "Cannot execute because there is an existing partition assignment.  Use --additional to override "
                "this and create a new partition assignment in addition to the existing one."
            )
        described = admin.describe_topics(sorted({tp.topic for tp in plan}))
        current = {
            tp: list(described[tp.topic].partitions[tp.partition].replicas)
            for tp in plan
            if tp.partition in described[tp.topic].partitions
        }
        missing = [str(tp) for tp in plan if tp not in current]
        if missing:
            raise CliError(f"Topic partitions do not exist: {', '.join(missing)}")
        ctx.output.lines(
            ["Current partition replica assignment", "", assignment_json(current), "",
             "Save this to use as the --reassignment-json-file option during rollback"]
        )  # fmt: skip
        if throttle >= 0 or log_dir_throttle >= 0:
            ctx.output.line(throttles.VERIFY_WARNING)
            _set_throttles(ctx, admin, current, plan, throttle=throttle, log_dir_throttle=log_dir_throttle)
        results: dict[TopicPartition, KafkaError | None] = {}
        items = list(plan.items())
        with progress_bar("Starting reassignments", len(items), unit="partitions") as bar:
            for chunk in bar.chunks(items):
                results.update(admin.alter_partition_reassignments(dict(chunk)))
                bar.advance(len(chunk))
    failed = {tp: err for tp, err in results.items() if err is not None}
    if failed:
        raise CliError("Error reassigning partition(s):\n" + _errors(failed))
    started = [str(tp) for tp in sorted(plan, key=lambda tp: (tp.topic, tp.partition))]
    ctx.output.line(f"Successfully started partition reassignment{_plural(started)} for {','.join(started)}")
    if moves:
        _move_log_dirs(ctx, moves, timeout_ms)
    return 0


def _move_log_dirs(ctx: Context, moves: LogDirMoves, timeout_ms: int) -> None:
    """AlterReplicaLogDirs for ``moves``, asked again while a broker answers REPLICA_NOT_AVAILABLE
    (a replica the reassignment is still creating), as Kafka's tool does until ``--timeout``."""
    pending = dict(moves)
    deadline = time.monotonic() + timeout_ms / 1000
    with ctx.admin() as admin:
        while True:
            results = admin.alter_replica_log_dirs(pending)
            for (topic, partition, broker), error in sorted(results.items()):
                if error is None:
                    path = pending.pop((topic, partition, broker))
                    ctx.output.line(
                        f"Successfully started moving log directory to {path} for replica {topic}-{partition} "
                        f"with broker {broker}"
                    )
            failed = {k: e for k, e in results.items() if e is not None}
            retriable = all(e.code == ErrorCode.REPLICA_NOT_AVAILABLE for e in failed.values())
            if not failed or not retriable or time.monotonic() >= deadline:
                break
            time.sleep(RETRY_S)
    if failed:
        lines = [f"{t}-{p}-{b}: {e}" for (t, p, b), e in sorted(failed.items())]
        raise CliError("Error moving replica(s) between log dirs:\n" + "\n".join(lines))


def _set_throttles(
    ctx: Context, admin: Any, current: Assignment, plan: Assignment, *, throttle: int, log_dir_throttle: int
) -> None:
    """Set the topic-level lists and broker-level rates of ``reassign_throttles``."""
    moves = throttles.moving(current, plan)
    brokers = throttles.reassigning_brokers(moves)
    if throttle >= 0:
        topic_changes = {
            ConfigResource(ResourceType.TOPIC, topic): [AlterConfigOp(k, v) for k, v in values.items()]
            for topic, values in throttles.topic_throttles(moves).items()
        }
        if topic_changes:
            admin.incremental_alter_configs(topic_changes)
    rates = [AlterConfigOp(k, str(throttle)) for k in throttles.BROKER_RATE_KEYS] if throttle >= 0 else []
    if log_dir_throttle >= 0:
        rates.append(AlterConfigOp(throttles.LOG_DIR_RATE, str(log_dir_throttle)))
    if rates and brokers:
        admin.incremental_alter_configs({ConfigResource(ResourceType.BROKER, str(b)): rates for b in brokers})
    if throttle >= 0:
        ctx.output.line(throttles.throttle_set_line(throttle))
    if log_dir_throttle >= 0:
        ctx.output.line(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s")


def _clear_throttles(ctx: Context, admin: Any, topics: Sequence[str]) -> list[str]:
    """Remove every broker's throttle rates and ``topics``' throttled-replicas lists."""
    brokers = [b.node_id for b in admin.describe_cluster().brokers]
    keys = (*throttles.BROKER_RATE_KEYS, throttles.LOG_DIR_RATE)
    delete = [AlterConfigOp(k, None, AlterOp.DELETE) for k in keys]
    admin.incremental_alter_configs({ConfigResource(ResourceType.BROKER, str(b)): delete for b in brokers})
    lists = [AlterConfigOp(k, None, AlterOp.DELETE) for k in (throttles.LEADER_REPLICAS, throttles.FOLLOWER_REPLICAS)]
    admin.incremental_alter_configs({ConfigResource(ResourceType.TOPIC, t): lists for t in sorted(set(topics))})
    return throttles.clearing_lines(brokers, topics)


def _verify(
    ctx: Context, plan: Assignment, *, preserve_throttles: bool = False, moves: LogDirMoves | None = None
) -> int:
    with ctx.admin() as admin:
        ongoing = admin.list_partition_reassignments(list(plan))
        described = admin.describe_topics(sorted({tp.topic for tp in plan}))
        dirs = admin.describe_log_dirs(sorted({b for _, _, b in moves})) if moves else {}
    lines = ["Status of partition reassignment:"]
    pending = 0
    for tp in sorted(plan, key=lambda tp: (tp.topic, tp.partition)):
        part = described[tp.topic].partitions.get(tp.partition)
        if tp in ongoing:
            pending += 1
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        elif part is not None and list(part.replicas) == plan[tp]:
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            pending += 1
            now = list(part.replicas) if part is not None else []
            lines.append(
                f"There is no active reassignment of partition {tp}, but replica set is {now} rather than {plan[tp]}."
            )
    for (topic, partition, broker), path in sorted((moves or {}).items()):
        replica = f"{topic}-{partition}-{broker}"
        found = dirs.get(broker, {}).get(path)
        info = None if found is None else found.replicas.get(TopicPartition(topic, partition))
        if info is not None and not info.is_future:
            lines.append(f"Reassignment of replica {replica} completed successfully.")
        else:
            pending += 1
            lines.append(f"Reassignment of replica {replica} is still in progress.")
    if not pending and not preserve_throttles:
        with ctx.admin() as admin:
            lines += _clear_throttles(ctx, admin, [tp.topic for tp in plan])
    ctx.output.lines(lines)
    if pending:
        raise CliError(f"{pending} partition reassignment(s) not completed")
    return 0


def _cancel(ctx: Context, plan: Assignment) -> int:
    with ctx.admin() as admin:
        ongoing = admin.list_partition_reassignments(list(plan))
        active = [tp for tp in sorted(plan, key=lambda tp: (tp.topic, tp.partition)) if tp in ongoing]
        if not active:
            ctx.output.line("None of the specified partition reassignments are active.")
            return 0
        results: dict[TopicPartition, KafkaError | None] = {}
        with progress_bar("Cancelling reassignments", len(active), unit="partitions") as bar:
            for chunk in bar.chunks(active):
                results.update(admin.alter_partition_reassignments(dict.fromkeys(chunk)))
                bar.advance(len(chunk))
    failed = {
        tp: err for tp, err in results.items() if err is not None and err.code != ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    }
    if failed:
        raise CliError(f"Error cancelling partition reassignment{_plural(list(failed))} for:\n" + _errors(failed))
    names = [str(tp) for tp in active]
    ctx.output.line(f"Successfully cancelled partition reassignment{_plural(names)} for: {','.join(names)}")
    return 0


def _list(ctx: Context) -> int:
    with ctx.admin() as admin:
        ongoing = admin.list_partition_reassignments()
    if ctx.output.is_json:
        ctx.output.json(
            [{"topic": tp.topic, "partition": tp.partition, "replicas": list(r.replicas),
              "adding": list(r.adding_replicas), "removing": list(r.removing_replicas)}
             for tp, r in sorted(ongoing.items(), key=lambda kv: (kv[0].topic, kv[0].partition))]
        )  # fmt: skip
        return 0
    if not ongoing:
        ctx.output.line("No partition reassignments found.")
        return 0
    lines = ["Current partition reassignments:"]
    for tp, r in sorted(ongoing.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        adding = f" adding: {list(r.adding_replicas)}." if r.adding_replicas else ""
        removing = f" removing: {list(r.removing_replicas)}." if r.removing_replicas else ""
        lines.append(f"{tp}: replicas: {list(r.replicas)}.{adding}{removing}")
    ctx.output.lines(lines)
    return 0


def _errors(failed: Mapping[TopicPartition, KafkaError]) -> str:
    return "\n".join(f"{tp}: {err.message or err.code.name} ({err.code.name})" for tp, err in failed.items())
