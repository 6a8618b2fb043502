"""``pylog acls``: ACLs, as ``kafka-acls`` manages them (same flags, same output wording).

    pylog acls --add --allow-principal User:alice --operation Read --topic orders --group loaders
    pylog acls --add --allow-principal User:etl --producer --topic orders --transactional-id etl-
               --resource-pattern-type prefixed
    pylog acls --add --allow-principal User:spark --consumer --topic orders --group spark-
    pylog acls --list [--topic orders] [--principal User:alice] [--resource-pattern-type match]
    pylog acls --remove --allow-principal User:alice --operation Read --topic orders --force

Resources: ``--topic``, ``--group``, ``--transactional-id`` (each repeatable) and ``--cluster``.
``--operation`` takes Kafka's names (Read, Write, Create, Delete, Alter, Describe, ClusterAction,
DescribeConfigs, AlterConfigs, IdempotentWrite, All; default All). Hosts default to ``*``.
``--producer``: WRITE, DESCRIBE and CREATE on the topics, WRITE and DESCRIBE on the
transactional ids, IDEMPOTENT_WRITE on the cluster with ``--idempotent``. ``--consumer``: READ
and DESCRIBE on the topics, READ on the groups. ``--remove`` without ``--force`` asks first.
``--resource-pattern-type``: literal (default) or prefixed for --add; also any or match for
--list and --remove. ``--command-config`` (common to every command) takes the client properties.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import UsageError
from pyspark_log.client.acl_admin import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

OPERATIONS = {
    "".join(part.capitalize() for part in op.name.split("_")).lower(): op
    for op in AclOperation
    if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
}
PATTERN_TYPES = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED, "match": PatternType.MATCH,
                 "any": PatternType.ANY}  # fmt: skip


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser("acls", help="ACLs (kafka-acls)", parents=[common])
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    for flag, what in (("--allow-principal", "principal allowed (User:name)"),
                       ("--deny-principal", "principal denied (User:name)"),
                       ("--allow-host", "host the allowed principals may connect from (default *)"),
                       ("--deny-host", "host the denied principals are denied from (default *)"),
                       ("--operation", "Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                                       "DescribeConfigs, AlterConfigs, IdempotentWrite or All (default All)"),
                       ("--topic", "topic name (or prefix)"), ("--group", "consumer group id (or prefix)"),
                       ("--transactional-id", "transactional id (or prefix)")):  # fmt: skip
        p.add_argument(flag, action="append", default=[], help=what)
    p.add_argument("--principal", action="append", default=[], help="--list: only ACLs of this principal")
    p.add_argument("--cluster", action="store_true", help="the cluster resource (kafka-cluster)")
    p.add_argument("--resource-pattern-type", default="literal", choices=sorted(PATTERN_TYPES),
                   help="literal (default), prefixed; match and any with --list / --remove")  # fmt: skip
    p.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    p.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs (needs --group)")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--force", action="store_true", help="do not ask before removing")
    p.set_defaults(handler=run)


def operation(name: str) -> AclOperation:
    op = OPERATIONS.get(name.replace("_", "").replace("-", "").lower())
    if op is None:
        raise UsageError(
            f"--operation {name!r}: expected one of {', '.join(sorted(_camel(o) for o in OPERATIONS.values()))}"
        )
    return op


def _camel(op: AclOperation) -> str:
    return "".join(part.capitalize() for part in op.name.split("_"))


def _principal(text: str) -> str:
    if ":" not in text:
        raise UsageError(f"principal {text!r}: expected Type:name, e.g. User:alice")
    return text


def resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic]
    out += [(ResourceType.GROUP, g) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _entries(args: argparse.Namespace) -> list[tuple[str, str, AclPermissionType]]:
    """(principal, host, permission) of the ACLs to add or remove."""
    allow_hosts = args.allow_host or ["*"]
    deny_hosts = args.deny_host or ["*"]
    out = [(_principal(p), h, AclPermissionType.ALLOW) for p in args.allow_principal for h in allow_hosts]
    out += [(_principal(p), h, AclPermissionType.DENY) for p in args.deny_principal for h in deny_hosts]
    return out


def bindings(args: argparse.Namespace, pattern: PatternType) -> list[AclBinding]:
    """The ACLs --add (or --remove with principals) names, kafka-acls' way."""
    entries = _entries(args)
    if not entries:
        raise UsageError("give --allow-principal or --deny-principal")
    wanted: list[tuple[ResourceType, str, AclOperation]] = []
    if args.producer or args.consumer:
        if args.operation:
            raise UsageError("--operation cannot be combined with --producer / --consumer")
        if args.producer:
            wanted += [
                (ResourceType.TOPIC, t, op)
                for t in args.topic
                for op in (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
            ]
            wanted += [
                (ResourceType.TRANSACTIONAL_ID, t, op)
                for t in args.transactional_id
                for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
            ]
            if args.idempotent:
                wanted.append((ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.IDEMPOTENT_WRITE))
        if args.consumer:
            if not args.group:
                raise UsageError("--consumer needs --group")
            wanted += [
                (ResourceType.TOPIC, t, op) for t in args.topic for op in (AclOperation.READ, AclOperation.DESCRIBE)
            ]
            wanted += [(ResourceType.GROUP, g, AclOperation.READ) for g in args.group]
        if not args.topic:
            raise UsageError("--producer / --consumer need --topic")
    else:
        ops = [operation(o) for o in args.operation] or [AclOperation.ALL]
        found = resources(args)
        if not found:
            raise UsageError("give a resource: --topic, --group, --transactional-id or --cluster")
        wanted = [(t, n, op) for t, n in found for op in ops]
    out = []
    for resource_type, name, op in wanted:
        resource_pattern = PatternType.LITERAL if resource_type == ResourceType.CLUSTER else pattern
        for principal, host, permission in entries:
            out.append(AclBinding(resource_type, name, resource_pattern, principal, host, op, permission))
    return list(dict.fromkeys(out))


def _pattern_text(resource_type: ResourceType, name: str, pattern: PatternType) -> str:
    return f"ResourcePattern(resourceType={resource_type.name}, name={name}, patternType={pattern.name})"


def _acl_text(b: AclBinding) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission_type.name})")  # fmt: skip


def _grouped(found: list[AclBinding]) -> dict[tuple[ResourceType, str, PatternType], list[AclBinding]]:
    out: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for b in found:
        out.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    return out


def _print(ctx: Context, title: str, found: list[AclBinding]) -> None:
    lines = []
    for (t, n, p), acls in _grouped(found).items():
        lines.append(f"{title} `{_pattern_text(t, n, p)}`: ")
        lines += [f" \t{_acl_text(b)} " for b in acls]
        lines.append("")
    ctx.output.lines(lines)


def run(args: argparse.Namespace, ctx: Context) -> int:
    pattern = PATTERN_TYPES[args.resource_pattern_type]
    if args.list:
        return _list(args, ctx, pattern)
    if args.add:
        if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise UsageError("--add takes --resource-pattern-type literal or prefixed")
        to_add = bindings(args, pattern)
        with ctx.admin() as admin:
            admin.create_acls(to_add)
            if not ctx.output.is_json:
                _print(ctx, "Adding ACLs for resource", to_add)
            _list_resources(ctx, admin, {(b.resource_type, b.name, b.pattern_type) for b in to_add})
        return 0
    return _remove(args, ctx, pattern)


def _list_resources(ctx: Context, admin: Any, keys: set[tuple[ResourceType, str, PatternType]]) -> None:
    found: list[AclBinding] = []
    for t, n, p in sorted(keys):
        found += admin.describe_acls(AclBindingFilter(t, n, p))
    _show(ctx, found)


def _show(ctx: Context, found: list[AclBinding]) -> None:
    if ctx.output.is_json:
        ctx.output.json([
            {"resource_type": b.resource_type.name, "name": b.name, "pattern_type": b.pattern_type.name,
             "principal": b.principal, "host": b.host, "operation": b.operation.name,
             "permission_type": b.permission_type.name}
            for b in found
        ])  # fmt: skip
    else:
        _print(ctx, "Current ACLs for resource", found)


def _filters(args: argparse.Namespace, pattern: PatternType) -> list[AclBindingFilter]:
    found = resources(args)
    principals = args.principal or [None]
    if not found:
        return [AclBindingFilter(pattern_type=pattern if args.resource_pattern_type != "literal" else PatternType.ANY,
                                 principal=p) for p in principals]  # fmt: skip
    return [AclBindingFilter(t, n, PatternType.LITERAL if t == ResourceType.CLUSTER else pattern, principal=p)
            for t, n in found for p in principals]  # fmt: skip


def _filter_text(f: AclBindingFilter) -> str:
    return (f"{_pattern_text(f.resource_type, f.name or '<any>', f.pattern_type)} "
            f"principal={f.principal or '<any>'}, host={f.host or '<any>'}, operation={f.operation.name}, "
            f"permissionType={f.permission_type.name}")  # fmt: skip


def _list(args: argparse.Namespace, ctx: Context, pattern: PatternType) -> int:
    with ctx.admin() as admin:
        found: list[AclBinding] = []
        for f in _filters(args, pattern):
            found += [b for b in admin.describe_acls(f) if b not in found]
    _show(ctx, found)
    return 0


def _remove(args: argparse.Namespace, ctx: Context, pattern: PatternType) -> int:
    if args.allow_principal or args.deny_principal:
        if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise UsageError("--remove with principals takes --resource-pattern-type literal or prefixed")
        filters = [AclBindingFilter(b.resource_type, b.name, b.pattern_type, b.principal, b.host, b.operation,
                                    b.permission_type) for b in bindings(args, pattern)]  # fmt: skip
    else:
        if not resources(args):
            raise UsageError("--remove needs a resource: --topic, --group, --transactional-id or --cluster")
        filters = _filters(args, pattern)
    if not args.force:
        listed = "\n".join(f" \t{_filter_text(f)}" for f in filters)
        sys.stderr.write(f"Are you sure you want to remove ACLs: \n{listed}\n (y/n)\n")
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            return 1
    with ctx.admin() as admin:
        removed = admin.delete_acls(filters)
    if ctx.output.is_json:
        _show(ctx, removed)
    else:
        _print(ctx, "Removed ACLs for resource", removed)
    return 0
