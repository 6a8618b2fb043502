"""``pylog cluster describe``: the cluster id, the controller and the brokers."""

from __future__ import annotations

import argparse
from typing import Any

from pyspark_log.cli.context import Context


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    cluster = commands.add_parser("cluster", help="describe the cluster", parents=[common])
    verbs = cluster.add_subparsers(dest="verb", metavar="VERB", required=True)
    p = verbs.add_parser("describe", help="cluster id, controller, brokers", parents=[common])
    p.set_defaults(handler=describe)


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
