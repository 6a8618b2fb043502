"""``pylog configs --entity-type broker-loggers``: kafka-configs' options for a broker's log
levels (KIP-412), checked before any connection is made."""

from __future__ import annotations

import pytest

from pyspark_log.cli import main
from pyspark_log.cli.configs import logger_ops
from pyspark_log.cli.errors import UsageError
from pyspark_log.client.admin import AlterConfigOp, AlterOp


def test_add_and_delete_config_become_set_and_delete() -> None:
    ops = logger_ops(["kafka.request.logger=DEBUG, state.change.logger=TRACE"], ["broker.server"])
    assert ops == [
        AlterConfigOp("kafka.request.logger", "DEBUG", AlterOp.SET),
        AlterConfigOp("state.change.logger", "TRACE", AlterOp.SET),
        AlterConfigOp("broker.server", None, AlterOp.DELETE),
    ]
    with pytest.raises(UsageError, match="logger=LEVEL"):
        logger_ops(["kafka.request.logger"], None)


BL = ["--entity-type", "broker-loggers"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--alter", *BL, "--add-config", "x=DEBUG"], "needs --entity-name BROKER_ID"),
        (["--alter", *BL, "--entity-name", "1"], "needs --add-config or --delete-config"),
        (["--describe", *BL, "--entity-name", "one"], "is a broker id"),
        (["--describe", *BL, "--entity-name", "1", "--add-config", "x=DEBUG"], "go with --alter"),
        (["--describe", *BL, "--entity-type", "users"], "no other entity"),
    ],
)
def test_usage_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--bootstrap-server", "127.0.0.1:1", "configs", *args]) == 2  # before any connection
    assert message in capsys.readouterr().err
