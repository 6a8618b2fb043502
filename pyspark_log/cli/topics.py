"""``pylog topics create|list|describe|delete|alter`` (Kafka's ``kafka-topics``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, UsageError, kafka_error
from pyspark_log.cli.output import node_list
from pyspark_log.cli.parsing import parse_kv_list, parse_replica_assignment, positive_int
from pyspark_log.client import AdminClient, AlterConfigOp, ConfigResource, KafkaError, NewTopic
from pyspark_log.client.admin import AlterOp, ResourceType
from pyspark_log.client.cluster import TopicMetadata
from pyspark_log.client.errors import ErrorCode

_MISSING = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID)


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    topics = commands.add_parser("topics", help="create, list, describe, alter and delete topics", parents=[common])
    verbs = topics.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("create", help="create a topic", parents=[common])
    p.add_argument("name", metavar="NAME")
    p.add_argument("--partitions", type=positive_int, metavar="N", help="partition count (broker default)")
    p.add_argument("--replication-factor", type=positive_int, metavar="N", help="replicas (broker default)")
    p.add_argument(
        "--replica-assignment", metavar="B:B,B:B", help="broker ids per partition (instead of the two counts)"
    )
    p.add_argument("--config", action="append", metavar="K=V", help="a topic config override (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="succeed if the topic already exists")
    p.set_defaults(handler=create)

    p = verbs.add_parser("list", help="list topic names", parents=[common])
    p.add_argument("--include-internal", action="store_true", help="list internal topics too")
    p.set_defaults(handler=list_)

    p = verbs.add_parser(
        "describe", help="partitions, leaders, replicas, ISR, cleanup policy, overridden configs", parents=[common]
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="topics to describe (default: all)")
    p.add_argument("--include-internal", action="store_true", help="with no NAME: describe internal topics too")
    health = p.add_mutually_exclusive_group()
    health.add_argument(
        "--under-replicated-partitions", action="store_true", help="only partitions whose ISR lacks a replica"
    )
    health.add_argument(
        "--under-min-isr-partitions", action="store_true", help="only partitions whose ISR is below min.insync.replicas"
    )
    health.add_argument("--at-min-isr-partitions", action="store_true", help="only partitions at min.insync.replicas")
    health.add_argument("--unavailable-partitions", action="store_true", help="only partitions without a live leader")
    p.set_defaults(handler=describe)

    p = verbs.add_parser("delete", help="delete topics", parents=[common])
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--if-exists", action="store_true", help="succeed for topics that do not exist")
    p.set_defaults(handler=delete)

    p = verbs.add_parser("alter", help="add partitions, set or delete config overrides", parents=[common])
    p.add_argument("name", metavar="NAME")
    p.add_argument("--partitions", type=positive_int, metavar="N", help="the new (larger) partition count")
    p.add_argument(
        "--replica-assignment", metavar="B:B,B:B", help="with --partitions: broker ids of each new partition"
    )
    p.add_argument("--config", action="append", metavar="K=V", help="set a config override (repeatable)")
    p.add_argument("--delete-config", action="append", metavar="K", help="remove a config override (repeatable)")
    p.set_defaults(handler=alter)


# -- create / delete / alter -----------------------------------------------------------------------


def create(args: argparse.Namespace, ctx: Context) -> int:
    configs = parse_kv_list(args.config)
    lists = None
    if args.replica_assignment is not None:
        if args.partitions is not None or args.replication_factor is not None:
            raise UsageError("--replica-assignment replaces --partitions and --replication-factor; give only it")
        lists = dict(enumerate(parse_replica_assignment(args.replica_assignment)))
    new = NewTopic(
        args.name, args.partitions or -1, args.replication_factor or -1, replica_assignment=lists, config=configs
    )
    with ctx.admin() as admin:
        try:
            admin.create_topics([new])
        except KafkaError as exc:
            if args.if_not_exists and exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return 0
            raise kafka_error(exc, args.name) from None
    ctx.output.line(f"Created topic {args.name}.")
    return 0


def delete(args: argparse.Namespace, ctx: Context) -> int:
    names = list(dict.fromkeys(args.names))
    errors: dict[str, KafkaError] = {}
    with ctx.admin() as admin:
        try:
            admin.delete_topics(names)
        except KafkaError as exc:
            errors = dict(getattr(exc, "errors", None) or {names[0]: exc})
    for name in names:
        if name not in errors:
            ctx.output.line(f"Deleted topic {name}.")
    if args.if_exists:
        errors = {n: e for n, e in errors.items() if e.code not in _MISSING}
    if errors:
        name, first = next(iter(errors.items()))
        err = kafka_error(first, name)
        more = len(errors) - 1
        raise CliError(f"{err}; and {more} more topic(s) failed" if more else str(err))
    return 0


def alter(args: argparse.Namespace, ctx: Context) -> int:
    sets = parse_kv_list(args.config)
    deletes = list(dict.fromkeys(args.delete_config or ()))
    if args.partitions is None and not sets and not deletes:
        raise UsageError("topics alter needs --partitions, --config or --delete-config")
    if args.replica_assignment is not None and args.partitions is None:
        raise UsageError("--replica-assignment names the new partitions' brokers: give --partitions too")
    new_lists = None if args.replica_assignment is None else parse_replica_assignment(args.replica_assignment)
    both = sorted(set(sets) & set(deletes))
    if both:
        raise UsageError(f"config {both[0]!r} is both set and deleted")
    done: list[str] = []
    with ctx.admin() as admin:
        _require_topic(admin, args.name)
        if sets or deletes:
            ops = [AlterConfigOp(k, v) for k, v in sets.items()]
            ops += [AlterConfigOp(k, None, AlterOp.DELETE) for k in deletes]
            try:
                admin.incremental_alter_configs({ConfigResource(ResourceType.TOPIC, args.name): ops})
            except KafkaError as exc:
                raise kafka_error(exc, args.name) from None
            done += [f"set {k}={v}" for k, v in sets.items()] + [f"deleted {k}" for k in deletes]
        if args.partitions is not None:
            try:
                assignments = None if new_lists is None else {args.name: new_lists}
                admin.create_partitions({args.name: args.partitions}, assignments=assignments)
            except KafkaError as exc:
                raise kafka_error(exc, args.name) from None
            done.append(f"partitions={args.partitions}")
    ctx.output.line(f"Altered topic {args.name}: {', '.join(done)}.")
    return 0


def _require_topic(admin: AdminClient, name: str) -> TopicMetadata:
    try:
        return admin.describe_topics([name])[name]
    except KafkaError as exc:
        raise kafka_error(exc, name) from None


# -- list / describe -------------------------------------------------------------------------------


def list_(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.output
    with ctx.admin() as admin:
        names = admin.list_topics(include_internal=args.include_internal)
        if not out.is_table:
            if out.is_json:
                out.json(names)
            else:
                out.lines(names)
            return 0
        try:
            metas = admin.describe_topics(names) if names else {}
        except KafkaError:  # a topic deleted meanwhile: fall back to names
            metas = {}
    rows = []
    for name in names:
        meta = metas.get(name)
        parts = None if meta is None else len(meta.partitions)
        rf = None if meta is None else _replication_factor(meta)
        rows.append((name, parts, rf))
    out.table(["Topic", "Partitions", "Replication factor"], rows, numeric=["Partitions", "Replication factor"])
    return 0


def _replication_factor(meta: TopicMetadata) -> int:
    return max((len(p.replicas) for p in meta.partitions.values()), default=0)


def _topic_configs(admin: AdminClient, names: Iterable[str]) -> dict[str, tuple[dict[str, str | None], str | None]]:
    """Per topic: its overridden configs (what kafka-topics prints) and its effective
    ``cleanup.policy`` (override or broker default; None if the broker did not say)."""
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    if not resources:
        return {}
    try:
        described = admin.describe_configs(resources)
    except KafkaError as exc:
        raise kafka_error(exc) from None
    out: dict[str, tuple[dict[str, str | None], str | None]] = {}
    for res, entries in described.items():
        overrides = {
            name: (None if entry.is_sensitive else entry.value)
            for name, entry in sorted(entries.items())
            if not entry.is_default
        }
        policy = entries.get("cleanup.policy")
        out[res.name] = (overrides, None if policy is None else policy.value)
    return out


def describe(args: argparse.Namespace, ctx: Context) -> int:
    out = ctx.output
    with ctx.admin() as admin:
        names = list(dict.fromkeys(args.names)) or admin.list_topics(include_internal=args.include_internal)
        if not names:
            metas: dict[str, TopicMetadata] = {}
        else:
            try:
                metas = admin.describe_topics(names)
            except KafkaError as exc:
                failed = getattr(exc, "errors", None) or {}
                raise kafka_error(exc, next(iter(failed), None)) from None
        configs = _topic_configs(admin, names)
        keep = _health_filter(args, admin, [n for n in names if n in metas])
    topics = [_topic_json(metas[n], *configs.get(n, ({}, None))) for n in names if n in metas]
    if keep is not None:
        topics = [{**t, "partitions": [p for p in t["partitions"] if keep(t["name"], p)]} for t in topics]
        topics = [t for t in topics if t["partitions"]]
        if not out.is_json and not out.is_table:  # kafka-topics prints only the partition lines then
            out.lines(line for line in _describe_text(topics) if line.startswith("\t"))
            return 0
    if out.is_json:
        out.json(topics)
    elif out.is_table:
        _describe_tables(ctx, topics)
    else:
        out.lines(_describe_text(topics))
    return 0


PartitionFilter = Callable[[str, dict[str, Any]], bool]


def _health_filter(args: argparse.Namespace, admin: AdminClient, names: list[str]) -> PartitionFilter | None:
    """kafka-topics' health filters over a partition's JSON entry (None: no filter given).
    Unavailable: no leader, or the leader among the offline replicas."""
    if args.under_replicated_partitions:
        return lambda _, p: len(p["isr"]) < len(p["replicas"])
    if args.unavailable_partitions:
        return lambda _, p: p["leader"] is None or p["leader"] in p["offlineReplicas"]
    if not (args.under_min_isr_partitions or args.at_min_isr_partitions):
        return None
    min_isr = _min_insync_replicas(admin, names)
    if args.under_min_isr_partitions:
        return lambda name, p: len(p["isr"]) < min_isr.get(name, 1)
    return lambda name, p: len(p["isr"]) == min_isr.get(name, 1)


def _min_insync_replicas(admin: AdminClient, names: list[str]) -> dict[str, int]:
    """Each topic's effective ``min.insync.replicas`` (override or broker default)."""
    if not names:
        return {}
    try:
        described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in names])
    except KafkaError as exc:
        raise kafka_error(exc) from None
    out = {}
    for res, entries in described.items():
        entry = entries.get("min.insync.replicas")
        out[res.name] = int(entry.value) if entry is not None and entry.value else 1
    return out


def _topic_json(meta: TopicMetadata, configs: dict[str, str | None], cleanup_policy: str | None) -> dict[str, Any]:
    """The JSON entry of a topic. ``configs``: its overrides (as kafka-topics); ``cleanupPolicy``:
    the effective ``cleanup.policy`` whether overridden or the broker's default."""
    parts = [meta.partitions[p] for p in sorted(meta.partitions)]
    return {
        "name": meta.name,
        "topicId": None if meta.topic_id is None else str(meta.topic_id),
        "internal": meta.is_internal,
        "partitionCount": len(parts),
        "replicationFactor": _replication_factor(meta),
        "cleanupPolicy": cleanup_policy,
        "configs": configs,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader if p.leader >= 0 else None,
                "leaderEpoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "offlineReplicas": list(p.offline_replicas),
            }
            for p in parts
        ],
    }


def _configs_text(configs: dict[str, str | None]) -> str:
    return ",".join(f"{k}={'<sensitive>' if v is None else v}" for k, v in configs.items())


def _describe_text(topics: list[dict[str, Any]]) -> Iterable[str]:
    """Kafka's ``kafka-topics --describe`` layout: a topic line, then one tab-indented line per partition."""
    for t in topics:
        yield (
            f"Topic: {t['name']}\tTopicId: {t['topicId']}\tPartitionCount: {t['partitionCount']}\t"
            f"ReplicationFactor: {t['replicationFactor']}\tConfigs: {_configs_text(t['configs'])}"
        )
        for p in t["partitions"]:
            leader = "none" if p["leader"] is None else p["leader"]
            line = (
                f"\tTopic: {t['name']}\tPartition: {p['partition']}\tLeader: {leader}\t"
                f"Replicas: {node_list(p['replicas'])}\tIsr: {node_list(p['isr'])}"
            )
            if p["offlineReplicas"]:
                line += f"\tOffline: {node_list(p['offlineReplicas'])}"
            yield line


def _describe_tables(ctx: Context, topics: list[dict[str, Any]]) -> None:
    for t in topics:
        title = (
            f"[bold]{t['name']}[/bold]  id {t['topicId']}  "
            f"partitions {t['partitionCount']}  replication factor {t['replicationFactor']}  "
            f"cleanup.policy {t['cleanupPolicy'] or '?'}"
        )
        caption = f"Configs: {_configs_text(t['configs']) or '(no overrides)'}"
        offline = any(p["offlineReplicas"] for p in t["partitions"])
        columns = ["Partition", "Leader", "Replicas", "ISR"] + (["Offline"] if offline else [])
        rows = [
            (p["partition"], p["leader"], node_list(p["replicas"]), node_list(p["isr"]))
            + ((node_list(p["offlineReplicas"]),) if offline else ())
            for p in t["partitions"]
        ]
        ctx.output.table(columns, rows, title=title, caption=caption, numeric=["Partition", "Leader"])
