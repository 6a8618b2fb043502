"""``pylog cluster describe``: the cluster id, the controller and the brokers.

``pylog cluster unregister --id N``: Kafka's ``kafka-cluster unregister`` (KIP-631's
UnregisterBroker, API 64) removes a decommissioned broker's registration; flags as Kafka's tool
(``--id/-i``, ``--bootstrap-server/-b``, ``--bootstrap-controller/-C``, ``--config/-c`` = the
common ``--command-config``). Prints ``Broker N is no longer registered.``; an id that is not
registered fails with ``Broker ID N is not currently registered (BROKER_ID_NOT_REGISTERED)``.
Drain the broker first (``pylog reassign-partitions``): its replicas stay in the replica sets.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from pyspark_log.cli.context import Context, connect_first
from pyspark_log.cli.errors import CliError
from pyspark_log.client.errors import KafkaError
from pyspark_log.wire import ApiKey, ErrorCode

CLIENT_ID = "pylog-cluster"


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    cluster = commands.add_parser("cluster", help="describe the cluster", parents=[common])
    verbs = cluster.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("describe", help="cluster id, controller, brokers", parents=[common])
    p.set_defaults(handler=describe)
    p = verbs.add_parser("unregister", help="unregister a decommissioned broker (UnregisterBroker)", parents=[common])
    p.add_argument("--id", "-i", type=int, required=True, help="The ID of the broker to unregister.")
    p.add_argument("-b", dest="bootstrap_server", help="short for --bootstrap-server (kafka-cluster's -b)")
    p.add_argument("--bootstrap-controller", "-C", dest="bootstrap_server", metavar="HOST:PORT",
                   help="a controller to send it to (pylog's controllers answer it like brokers)")  # fmt: skip
    p.add_argument("--config", "-c", dest="command_config", metavar="FILE", help="same as --command-config")
    p.set_defaults(handler=unregister)


def describe(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.admin() as admin:
        desc = admin.describe_cluster()
    controller = desc.controller_id if desc.controller_id >= 0 else None
    brokers = [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in desc.brokers]
    out = ctx.output
    if out.is_json:
        out.json({"clusterId": desc.cluster_id, "controller": controller, "brokers": brokers})
    elif out.is_table:
        title = f"Cluster [bold]{desc.cluster_id or '-'}[/bold]  controller {'-' if controller is None else controller}"
        rows = [(b["id"], b["host"], b["port"], b["rack"], "yes" if b["id"] == controller else "") for b in brokers]
        out.table(["Broker", "Host", "Port", "Rack", "Controller"], rows, title=title, numeric=["Broker", "Port"])
    else:
        out.line(f"ClusterId: {desc.cluster_id}\tController: {'none' if controller is None else controller}")
        out.lines(
            f"Broker: {b['id']}\tHost: {b['host']}\tPort: {b['port']}\tRack: {b['rack'] or 'null'}" for b in brokers
        )
    return 0


def unregister(args: argparse.Namespace, ctx: Context) -> int:
    timeout_ms = float(ctx.config().get("request.timeout.ms", 30000))
    asyncio.run(_unregister(ctx.bootstrap, int(args.id), timeout_ms))
    ctx.output.line(f"Broker {args.id} is no longer registered.")
    return 0


async def _unregister(bootstrap: str, broker_id: int, timeout_ms: float) -> None:
    """UnregisterBroker v0 to the first bootstrap server that answers (it forwards it to the
    active controller); a refusal raises ``CliError`` with the broker's message and code name."""
    server, conn = await connect_first(bootstrap, timeout_ms, CLIENT_ID)
    try:
        if ApiKey.UNREGISTER_BROKER not in conn.api_versions:
            raise CliError(f"{server} does not serve UnregisterBroker (a KRaft cluster serves it; set process.roles)")
        body = await conn.request(ApiKey.UNREGISTER_BROKER, {"broker_id": broker_id}, version=0)
    except KafkaError as exc:
        raise CliError(f"UnregisterBroker to {server} failed: {exc} ({exc.code.name})") from exc
    finally:
        conn.close()
    assert body is not None
    code = int(body.get("error_code", 0))
    if code != ErrorCode.NONE:
        name = ErrorCode(code).name
        raise CliError(f"{body.get('error_message') or name.lower().replace('_', ' ')} ({name})")
