"""``pylog configs``: client quotas and broker log levels, as Kafka's ``kafka-configs`` spells them.

    pylog configs --alter --entity-type clients --entity-name loader --add-config producer_byte_rate=1048576
    pylog configs --alter --entity-type clients --entity-default --add-config consumer_byte_rate=2097152
    pylog configs --alter --entity-type users --entity-name alice --entity-type clients --entity-name loader \\
        --add-config 'producer_byte_rate=1024,request_percentage=50'
    pylog configs --alter --entity-type clients --entity-name loader --delete-config producer_byte_rate
    pylog configs --describe --entity-type clients [--entity-name loader | --entity-default]

As in kafka-configs, each ``--entity-type`` (``users``, ``clients``, ``ips``) takes the
``--entity-name`` or ``--entity-default`` that follows it; ``--describe`` of a type without a name
lists every entity of that type. ``--add-config`` takes ``k=v`` pairs separated by commas
(repeatable); ``--delete-config`` takes keys separated by commas. Topic configs are changed with
``pylog topics alter``.

A broker's loggers (KIP-412; DescribeConfigs / IncrementalAlterConfigs on ``BROKER_LOGGER``):

    pylog configs --describe --entity-type broker-loggers --entity-name 1
    pylog configs --alter --entity-type broker-loggers --entity-name 1 --add-config kafka.request.logger=DEBUG
    pylog configs --alter --entity-type broker-loggers --entity-name 1 --delete-config kafka.request.logger

``--delete-config`` puts a logger back to the root logger's level. Without ``--entity-name``,
``--describe`` lists the loggers of every broker. Output as kafka-configs prints it.

Dynamic broker configs (KIP-226; IncrementalAlterConfigs / DescribeConfigs on ``BROKER``), of
one broker or the cluster-wide default, stored in the metadata log (docs/operations.md,
"Changing broker configs at run time"):

    pylog configs --alter --entity-type brokers --entity-name 1 --add-config message.max.bytes=2097152
    pylog configs --alter --entity-type brokers --entity-default --add-config log.retention.ms=86400000
    pylog configs --alter --entity-type brokers --entity-name 1 --delete-config message.max.bytes
    pylog configs --describe --entity-type brokers [--entity-name 1 | --entity-default]

``--describe`` lists the dynamic configs only (without a name: the default's, then each broker's).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, UsageError
from pyspark_log.client.admin import AlterConfigOp, AlterOp, ConfigResource, ResourceType
from pyspark_log.client.quotas import (
    MATCH_ANY,
    MATCH_DEFAULT,
    MATCH_EXACT,
    ClientQuotaAlteration,
    ClientQuotaFilterComponent,
)

ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
BROKER_LOGGERS = "broker-loggers"  # KIP-412: a broker's log levels, changed at run time
BROKERS = "brokers"  # KIP-226: dynamic broker configs
_SOURCE_NAMES = {
    1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
}  # fmt: skip
_WHAT = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}  # in kafka-configs' order


class _Ordered(argparse.Action):
    """Keeps ``--entity-type`` / ``--entity-name`` / ``--entity-default`` in command-line order."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        items = list(getattr(namespace, "entity_parts", None) or [])
        items.append((self.dest, values))
        namespace.entity_parts = items


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "configs",
        help="describe and alter client quotas, broker configs and log levels (kafka-configs)",
        parents=[common],
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--describe", action="store_true", help="show the quotas of the entities")
    mode.add_argument("--alter", action="store_true", help="add or delete quotas of one entity")
    p.add_argument(
        "--entity-type", action=_Ordered, dest="type", choices=sorted([*ENTITY_TYPES, BROKER_LOGGERS, BROKERS]),
        help="entity type",
    )  # fmt: skip
    p.add_argument("--entity-name", action=_Ordered, dest="name", metavar="NAME", help="name of the entity")
    p.add_argument(
        "--entity-default", action=_Ordered, dest="default", nargs=0, help="the default entity of the type before it"
    )
    p.add_argument("--add-config", action="append", metavar="K=V[,K=V]", help="quotas to set")
    p.add_argument("--delete-config", action="append", metavar="K[,K]", help="quotas to remove")
    p.set_defaults(handler=run, entity_parts=[])


def entity_spec(parts: Sequence[tuple[str, Any]]) -> list[tuple[str, str | None, bool]]:
    """``[(entity type, name, named)]`` from the ordered options; ``named`` false: no name or
    default was given (describe lists every entity of the type)."""
    spec: list[tuple[str, str | None, bool]] = []
    for kind, value in parts:
        if kind == "type":
            spec.append((ENTITY_TYPES[value], None, False))
            continue
        if not spec or spec[-1][2]:
            raise UsageError(
                f"--entity-{kind} must follow an --entity-type (e.g. --entity-type clients --entity-name X)"
            )
        entity_type = spec[-1][0]
        spec[-1] = (entity_type, value if kind == "name" else None, True)
    if not spec:
        raise UsageError(
            "give --entity-type users|clients|ips|brokers|broker-loggers (topic configs: pylog topics alter)"
        )
    if len({t for t, _, _ in spec}) != len(spec):
        raise UsageError("each --entity-type may be given once")
    return spec


def parse_quota_ops(add: Sequence[str] | None, delete: Sequence[str] | None) -> dict[str, float | None]:
    ops: dict[str, float | None] = {}
    for item in add or ():
        for pair in filter(None, (p.strip() for p in item.split(","))):
            key, _, text = pair.partition("=")
            try:
                ops[key.strip()] = float(text)
            except ValueError:
                raise UsageError(f"--add-config {pair!r}: give key=number, e.g. producer_byte_rate=1048576") from None
    for item in delete or ():
        for key in filter(None, (k.strip() for k in item.split(","))):
            ops[key] = None
    return ops


def describe_entity(entity: Sequence[tuple[str, str | None]]) -> str:
    """kafka-configs' wording, user first: ``user-principal 'alice', client-id 'loader'``,
    ``the default client-id``."""
    ordered = sorted(entity, key=lambda pair: list(_WHAT).index(pair[0]) if pair[0] in _WHAT else len(_WHAT))
    return ", ".join(f"the default {_WHAT[t]}" if n is None else f"{_WHAT[t]} '{n}'" for t, n in ordered)


def run(args: argparse.Namespace, ctx: Context) -> int:
    if any(kind == "type" and value == BROKER_LOGGERS for kind, value in args.entity_parts):
        return run_broker_loggers(args, ctx)
    if any(kind == "type" and value == BROKERS for kind, value in args.entity_parts):
        return run_brokers(args, ctx)
    spec = entity_spec(args.entity_parts)
    if args.alter:
        unnamed = [t for t, _, named in spec if not named]
        if unnamed:
            raise UsageError(f"--alter needs --entity-name or --entity-default after --entity-type for {unnamed[0]}")
        ops = parse_quota_ops(args.add_config, args.delete_config)
        if not ops:
            raise UsageError("--alter needs --add-config or --delete-config")
        entity = {t: n for t, n, _ in spec}
        with ctx.admin() as admin:
            admin.alter_client_quotas([ClientQuotaAlteration(entity, ops)])
        if not ctx.output.is_json:
            ctx.output.line(f"Completed updating config for {describe_entity(sorted(entity.items()))}.")
        else:
            ctx.output.json({"altered": [{"entityType": t, "entityName": n} for t, n in sorted(entity.items())]})
        return 0
    if args.add_config or args.delete_config:
        raise UsageError("--add-config and --delete-config go with --alter")
    components = [
        ClientQuotaFilterComponent(t, n, MATCH_EXACT if n is not None else MATCH_DEFAULT)
        if named
        else ClientQuotaFilterComponent(t, None, MATCH_ANY)
        for t, n, named in spec
    ]
    with ctx.admin() as admin:
        found = admin.describe_client_quotas(components, strict=True)
    out = ctx.output
    if out.is_json:
        out.json(
            [
                {"entity": [{"entityType": t, "entityName": n} for t, n in key], "configs": values}
                for key, values in sorted(found.items(), key=lambda kv: str(kv[0]))
            ]
        )
        return 0
    for key, values in sorted(found.items(), key=lambda kv: str(kv[0])):
        configs = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
        out.line(f"Quota configs for {describe_entity(key)} are {configs}")
    return 0


def logger_ops(add: Sequence[str] | None, delete: Sequence[str] | None) -> list[AlterConfigOp]:
    ops: list[AlterConfigOp] = []
    for item in add or ():
        for pair in filter(None, (p.strip() for p in item.split(","))):
            name, sep, level = pair.partition("=")
            if not sep or not name.strip():
                raise UsageError(f"--add-config {pair!r}: give logger=LEVEL, e.g. kafka.request.logger=DEBUG")
            ops.append(AlterConfigOp(name.strip(), level.strip(), AlterOp.SET))
    for item in delete or ():
        ops.extend(
            AlterConfigOp(name, None, AlterOp.DELETE) for name in filter(None, (k.strip() for k in item.split(",")))
        )
    return ops


def run_broker_loggers(args: argparse.Namespace, ctx: Context) -> int:
    """``--entity-type broker-loggers``: describe or alter one broker's log levels (KIP-412)."""
    parts = list(args.entity_parts)
    if len(parts) > 2 or (len(parts) == 2 and parts[1][0] != "name"):
        raise UsageError("--entity-type broker-loggers takes one --entity-name BROKER_ID (no other entity)")
    name = str(parts[1][1]) if len(parts) == 2 else None
    if name is not None and not name.isdigit():
        raise UsageError(f"--entity-name {name!r}: a broker-loggers entity is a broker id (an integer)")
    out = ctx.output
    if args.alter:
        if name is None:
            raise UsageError("--alter --entity-type broker-loggers needs --entity-name BROKER_ID")
        ops = logger_ops(args.add_config, args.delete_config)
        if not ops:
            raise UsageError("--alter needs --add-config or --delete-config")
        resource = ConfigResource(ResourceType.BROKER_LOGGER, name)
        with ctx.admin() as admin:
            known = admin.describe_configs([resource]).get(resource, {})
            unknown = [op.name for op in ops if op.name not in known]
            if unknown:  # kafka-configs checks the names against the broker's loggers first
                raise CliError(f"Invalid broker logger(s): {', '.join(unknown)}")
            admin.incremental_alter_configs({resource: ops})
        if out.is_json:
            out.json({"altered": [{"entityType": BROKER_LOGGERS, "entityName": name}]})
        else:
            out.line(f"Completed updating config for broker-logger {name}.")
        return 0
    if args.add_config or args.delete_config:
        raise UsageError("--add-config and --delete-config go with --alter")
    with ctx.admin() as admin:
        ids = [name] if name is not None else [str(b.node_id) for b in admin.describe_cluster().brokers]
        resources = [ConfigResource(ResourceType.BROKER_LOGGER, i) for i in sorted(ids, key=int)]
        found = admin.describe_configs(resources)
    if out.is_json:
        out.json(
            [
                {"entityType": BROKER_LOGGERS, "entityName": res.name,
                 "configs": {entry.name: entry.value for entry in found.get(res, {}).values()}}
                for res in resources
            ]
        )  # fmt: skip
        return 0
    for res in resources:
        out.line(f"Dynamic configs for broker-logger {res.name} are:")  # as kafka-configs prints
        for entry in found.get(res, {}).values():
            out.line(f"  {entry.name}={entry.value} sensitive={str(entry.is_sensitive).lower()} synonyms={{}}")
    return 0


def broker_ops(add: Sequence[str] | None, delete: Sequence[str] | None) -> list[AlterConfigOp]:
    """``--add-config k=v,k=v`` (SET) and ``--delete-config k,k`` (DELETE) of broker configs."""
    ops: list[AlterConfigOp] = []
    for item in add or ():
        for pair in filter(None, (p.strip() for p in item.split(","))):
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"--add-config {pair!r}: give key=value, e.g. message.max.bytes=2097152")
            ops.append(AlterConfigOp(key.strip(), value.strip(), AlterOp.SET))
    for item in delete or ():
        ops.extend(
            AlterConfigOp(key, None, AlterOp.DELETE) for key in filter(None, (k.strip() for k in item.split(",")))
        )
    return ops


def broker_entity(parts: Sequence[tuple[str, Any]]) -> str | None:
    """The BROKER resource name of ``--entity-type brokers [--entity-name ID | --entity-default]``:
    the id, ``""`` for the cluster default, None when neither was given."""
    if len(parts) > 2 or (len(parts) == 2 and parts[1][0] not in ("name", "default")):
        raise UsageError("--entity-type brokers takes one --entity-name BROKER_ID or --entity-default")
    if len(parts) < 2:
        return None
    if parts[1][0] == "default":
        return ""
    name = str(parts[1][1])
    if not name.isdigit():
        raise UsageError(f"--entity-name {name!r}: a brokers entity is a broker id (an integer)")
    return name


def run_brokers(args: argparse.Namespace, ctx: Context) -> int:
    """``--entity-type brokers``: describe or alter dynamic broker configs (KIP-226)."""
    name = broker_entity(args.entity_parts)
    out = ctx.output
    if args.alter:
        if name is None:
            raise UsageError("--alter --entity-type brokers needs --entity-name BROKER_ID or --entity-default")
        ops = broker_ops(args.add_config, args.delete_config)
        if not ops:
            raise UsageError("--alter needs --add-config or --delete-config")
        with ctx.admin() as admin:
            admin.incremental_alter_configs({ConfigResource(ResourceType.BROKER, name): ops})
        if out.is_json:
            out.json({"altered": [{"entityType": BROKERS, "entityName": name}]})
        elif name:
            out.line(f"Completed updating config for broker {name}.")
        else:
            out.line("Completed updating default config for brokers in the cluster.")
        return 0
    if args.add_config or args.delete_config:
        raise UsageError("--add-config and --delete-config go with --alter")
    with ctx.admin() as admin:
        if name is None:
            ids = sorted((str(b.node_id) for b in admin.describe_cluster().brokers), key=int)
            names = ["", *ids]
        else:
            names = [name]
        resources = [ConfigResource(ResourceType.BROKER, n) for n in names]
        found = admin.describe_configs(resources)
    shown: list[tuple[str, list[Any]]] = []
    for res in resources:
        wanted = 2 if res.name else 3  # DYNAMIC_BROKER_CONFIG / DYNAMIC_DEFAULT_BROKER_CONFIG
        shown.append((res.name, [e for e in found.get(res, {}).values() if e.source == wanted]))
    if out.is_json:
        out.json(
            [{"entityType": BROKERS, "entityName": n, "configs": {e.name: e.value for e in es}} for n, es in shown]
        )
        return 0
    for entity, entries in shown:  # kafka-configs' wording
        out.line(
            f"Dynamic configs for broker {entity} are:" if entity else "Default configs for brokers in the cluster are:"
        )
        for e in entries:
            synonyms = ", ".join(f"{_SOURCE_NAMES.get(src, src)}:{key}={value}" for key, value, src in e.synonyms)
            out.line(f"  {e.name}={e.value} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}")
    return 0
