"""``pylog users``: SCRAM credentials, as ``kafka-configs --entity-type users`` manages them.

    pylog users --alter --entity-name alice --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    pylog users --alter --entity-name alice --add-config 'SCRAM-SHA-512=[password=alice-secret]'
    pylog users --alter --entity-name alice --delete-config SCRAM-SHA-512
    pylog users --describe [--entity-name alice]

``--entity-type users`` is accepted for copy-and-paste from Kafka's tool. The password is salted
in this process (AlterUserScramCredentials carries only the salted password, KIP-554); iterations
default to 4096, as in kafka-configs. Output is Kafka's wording::

    Completed updating config for user alice.
    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from pyspark_log.cli.context import Context
from pyspark_log.cli.errors import CliError, UsageError
from pyspark_log.client import KafkaError

DEFAULT_ITERATIONS = 4096
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_ADD = re.compile(r"^(?P<mechanism>SCRAM-SHA-(?:256|512))=\[(?P<body>.*)\]$", re.IGNORECASE)


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser("users", help="SCRAM users (kafka-configs --entity-type users)", parents=[common])
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="add or delete SCRAM credentials")
    action.add_argument("--describe", action="store_true", help="list mechanisms and iterations")
    p.add_argument("--entity-type", choices=["users"], default="users", help="only 'users' (Kafka's flag)")
    p.add_argument("--entity-name", metavar="USER", help="the user name")
    p.add_argument(
        "--add-config", action="append", default=[], metavar="SPEC",
        help="'SCRAM-SHA-256=[iterations=N,password=P]' (comma-separated specs allowed)",
    )  # fmt: skip
    p.add_argument("--delete-config", action="append", default=[], metavar="MECHANISM", help="SCRAM-SHA-256 or -512")
    p.set_defaults(handler=run)


def parse_add_config(text: str) -> list[tuple[str, str, int]]:
    """``SCRAM-SHA-256=[iterations=8192,password=x],SCRAM-SHA-512=[password=y]`` →
    ``[(mechanism, password, iterations)]``; a password may contain ',' but not ']'."""
    out = []
    for spec in re.findall(r"[^,\[\]]+=\[[^\]]*\]", text):
        match = _ADD.match(spec.strip())
        if match is None:
            raise UsageError(f"--add-config {spec!r}: expected SCRAM-SHA-256=[password=...] or SCRAM-SHA-512=[...]")
        fields: dict[str, str] = {}
        for part in re.split(r",(?=iterations=|password=)", match.group("body")):
            key, sep, value = part.partition("=")
            if not sep or key not in ("iterations", "password"):
                raise UsageError(f"--add-config: unknown SCRAM setting {key!r} (iterations, password)")
            fields[key] = value
        if not fields.get("password"):
            raise UsageError("--add-config: password=... is required")
        try:
            iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
        except ValueError:
            raise UsageError("--add-config: iterations must be a number") from None
        out.append((match.group("mechanism").upper(), fields["password"], iterations))
    if not out:
        raise UsageError(f"--add-config {text!r}: expected SCRAM-SHA-256=[password=...]")
    return out


def run(args: argparse.Namespace, ctx: Context) -> int:
    if args.describe:
        return _describe(args, ctx)
    user = args.entity_name
    if not user:
        raise UsageError("--alter needs --entity-name USER")
    upserts = [(user, m, pw, it) for spec in args.add_config for m, pw, it in parse_add_config(spec)]
    deletes = []
    for text in args.delete_config:
        for name in (n.strip().upper() for n in text.split(",") if n.strip()):
            if name not in MECHANISMS:
                raise UsageError(f"--delete-config {name!r}: expected SCRAM-SHA-256 or SCRAM-SHA-512")
            deletes.append((user, name))
    if not upserts and not deletes:
        raise UsageError("--alter needs --add-config or --delete-config")
    with ctx.admin() as admin:
        results = admin.alter_user_scram_credentials(upserts, deletes)
    error = results.get(user)
    if error is not None:
        raise CliError(f"{error} ({error.code.name})")
    ctx.output.lines([f"Completed updating config for user {user}."])
    return 0


def _describe(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.admin() as admin:
        results = admin.describe_user_scram_credentials([args.entity_name] if args.entity_name else None)
    lines: list[str] = []
    doc: dict[str, Any] = {}
    for user, found in sorted(results.items()):
        if isinstance(found, KafkaError):
            if args.entity_name:
                raise CliError(f"{found} ({found.code.name})")
            continue
        configs = ", ".join(f"{m}=iterations={i}" for m, i in found)
        lines.append(f"SCRAM credential configs for user-principal '{user}' are {configs}")
        doc[user] = [{"mechanism": m, "iterations": i} for m, i in found]
    if ctx.output.is_json:
        ctx.output.json(doc)
    else:
        ctx.output.lines(lines)
    return 0
