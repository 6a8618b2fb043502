"""``pylog configs --entity-type brokers``: kafka-configs' options for dynamic broker configs
(KIP-226), checked before any connection is made."""

from __future__ import annotations

import pytest

from pyspark_log.cli import main
from pyspark_log.cli.configs import broker_entity, broker_ops
from pyspark_log.cli.errors import UsageError
from pyspark_log.client.admin import AlterConfigOp, AlterOp


def test_add_and_delete_config_become_set_and_delete() -> None:
    assert broker_ops(["message.max.bytes=2000, log.retention.ms=5"], ["log.cleaner.threads"]) == [
        AlterConfigOp("message.max.bytes", "2000", AlterOp.SET),
        AlterConfigOp("log.retention.ms", "5", AlterOp.SET),
        AlterConfigOp("log.cleaner.threads", None, AlterOp.DELETE),
    ]
    with pytest.raises(UsageError, match="key=value"):
        broker_ops(["message.max.bytes"], None)


def test_entity_names() -> None:
    assert broker_entity([("type", "brokers"), ("name", "2")]) == "2"
    assert broker_entity([("type", "brokers"), ("default", [])]) == ""
    assert broker_entity([("type", "brokers")]) is None


B = ["--entity-type", "brokers"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--alter", *B, "--add-config", "x=1"], "needs --entity-name BROKER_ID or --entity-default"),
        (["--alter", *B, "--entity-name", "1"], "needs --add-config or --delete-config"),
        (["--describe", *B, "--entity-name", "one"], "is a broker id"),
        (["--describe", *B, "--entity-default", "--add-config", "x=1"], "go with --alter"),
        (["--describe", *B, "--entity-type", "users"], "--entity-name BROKER_ID or --entity-default"),
    ],
)
def test_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--bootstrap-server", "127.0.0.1:1", "configs", *args]) == 2  # before any connection
    assert message in capsys.readouterr().err
