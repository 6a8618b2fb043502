"""Spark reads a topic whose history is mostly in the remote tier (KIP-405): ``format("pylog")``
with the default ``readPath=broker`` gets every record from offset 0, in order, the old ones
served by the broker from the tier (tests/integration/test_tiered_storage.py has the broker side).
``readPath=files`` reads local segment files only (docs/compatibility.md, "Tiered storage")."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from pyspark_log.embedded import EmbeddedBroker
from spark_tests.conftest import BROKER_OVERRIDES
from spark_tests.helpers import read
from tests.integration.test_tiered_storage import RECORDS, create_topic, produce, tier_overrides, wait_tiered

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def tiered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedBroker, object]]:
    root = tmp_path_factory.mktemp("tiered-spark")
    tier = root / "tier"
    overrides = {**BROKER_OVERRIDES, **tier_overrides(tier)}
    with EmbeddedBroker(root / "node", python=sys.executable, overrides=overrides) as broker:
        yield broker, tier


def test_spark_reads_tiered_history_from_offset_zero(spark, tiered: tuple[EmbeddedBroker, object]) -> None:
    broker, tier = tiered
    topic = "tiered-spark"
    create_topic(broker.bootstrap_servers, topic)
    values = produce(broker.bootstrap_servers, topic)
    local_start, _ = wait_tiered(broker.bootstrap_servers, topic, tier)  # type: ignore[arg-type]
    assert local_start > RECORDS // 2
    rows = read(spark, broker.bootstrap_servers, subscribe=topic, startingOffsets="earliest").collect()
    rows = sorted(rows, key=lambda r: r.offset)
    assert [r.offset for r in rows] == list(range(RECORDS))
    assert [bytes(r.value) for r in rows] == values


def test_direct_read_path_reads_tiered_offsets_through_the_broker(spark, tiered: tuple[EmbeddedBroker, object]) -> None:
    """``readPath=files``: the local files start at the local log start, so the task reads the
    tiered range through the broker (the direct reader's "files start above the range" fallback)
    and the rest from the files; every record, once, in order."""
    broker, tier = tiered
    topic = "tiered-spark-files"
    create_topic(broker.bootstrap_servers, topic)
    values = produce(broker.bootstrap_servers, topic)
    wait_tiered(broker.bootstrap_servers, topic, tier)  # type: ignore[arg-type]
    options = {"readPath": "files", "logDirs.1": str(broker.data_dir / "logs")}
    rows = read(spark, broker.bootstrap_servers, subscribe=topic, startingOffsets="earliest", **options).collect()
    rows = sorted(rows, key=lambda r: r.offset)
    assert [r.offset for r in rows] == list(range(RECORDS))
    assert [bytes(r.value) for r in rows] == values
