"""``pylog users --add-config`` parses kafka-configs' SCRAM spec (issue #15)."""

from __future__ import annotations

import pytest

from pyspark_log.cli.errors import UsageError
from pyspark_log.cli.users import parse_add_config

pytestmark = pytest.mark.unit


def test_kafka_configs_specs() -> None:
    assert parse_add_config("SCRAM-SHA-256=[iterations=8192,password=alice-secret]") == [
        ("SCRAM-SHA-256", "alice-secret", 8192)
    ]
    assert parse_add_config("SCRAM-SHA-256=[password=a,b],scram-sha-512=[password=c]") == [
        ("SCRAM-SHA-256", "a,b", 4096),
        ("SCRAM-SHA-512", "c", 4096),
    ]


@pytest.mark.parametrize(
    "spec",
    ["SCRAM-SHA-1=[password=x]", "SCRAM-SHA-256=[iterations=8192]", "SCRAM-SHA-256=[salt=x,password=y]", "nonsense"],
)
def test_bad_specs_are_usage_errors(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_add_config(spec)
