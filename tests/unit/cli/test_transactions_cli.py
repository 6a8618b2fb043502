"""``pylog transactions`` and ``pylog delete-records``: parsing and output that need no broker."""

from __future__ import annotations

import pytest

from pyspark_log.cli.app import build_parser, main
from pyspark_log.cli.delete_records import parse_offset_json
from pyspark_log.cli.errors import UsageError
from pyspark_log.cli.transactions import kafka_table
from pyspark_log.client.types import TopicPartition

pytestmark = pytest.mark.unit


def test_kafka_delete_records_json() -> None:
    text = (
        '{"partitions": [{"topic": "a", "partition": 0, "offset": 5}, '
        '{"topic": "a", "partition": 1, "offset": -1}], "version": 1}'
    )
    assert parse_offset_json(text, "f") == {TopicPartition("a", 0): 5, TopicPartition("a", 1): -1}
    assert parse_offset_json('{"partitions": [{"topic": "a", "partition": 0, "offset": 5}]}', "f") == {
        TopicPartition("a", 0): 5
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "expected an object"),
        ('{"partitions": [], "version": 2}', "not supported version field value 2"),
        ('{"version": 1}', "missing partitions field"),
        ('{"partitions": [{"topic": "a", "partition": 0}]}', "needs topic, partition and offset"),
        ('{"partitions": [{"topic": "a", "partition": "0", "offset": 1}]}', "needs topic, partition and offset"),
        ('{"partitions": []}', "the partitions list is empty"),
        (
            '{"partitions": [{"topic": "a", "partition": 0, "offset": 1}, '
            '{"topic": "a", "partition": 0, "offset": 2}]}',
            "duplicate topic partitions: a-0",
        ),
    ],
)
def test_bad_delete_records_json_names_the_problem(text: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_offset_json(text, "offsets.json")
    assert message in str(info.value)
    assert "offsets.json" in str(info.value)


def test_kafka_table_pads_every_column_and_ends_cells_with_a_tab() -> None:
    assert kafka_table(["ProducerId", "Epoch"], [(12345678901, 0), (7, 12)]) == [
        "ProducerId \tEpoch\t",
        "12345678901\t0    \t",
        "7          \t12   \t",
    ]


def test_the_commands_parse_with_kafka_flags() -> None:
    parser = build_parser()
    args = parser.parse_args(
        [
            "transactions",
            "find-hanging",
            "--broker-id",
            "3",
            "--max-transaction-timeout",
            "5",
            "--bootstrap-server",
            "h:1",
        ]
    )
    assert (args.broker_id, args.max_transaction_timeout, args.bootstrap_server) == (3, 5, "h:1")
    args = parser.parse_args(["transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "9"])
    assert (args.topic, args.partition, args.start_offset) == ("t", 0, 9)
    args = parser.parse_args(["delete-records", "--offset-json-file", "x.json"])
    assert args.offset_json_file == "x.json"


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["transactions", "describe-producers", "--topic", "t"]) == 2
    assert "--partition" in capsys.readouterr().err
    assert main(["transactions", "find-hanging", "--partition", "1", "--bootstrap-server", "127.0.0.1:1"]) == 2
    assert "--topic or --broker-id" in capsys.readouterr().err
