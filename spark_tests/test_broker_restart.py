"""A running streaming query while its broker restarts (clean stop, then a crash): the query keeps
going, or fails with a clear error and resumes from its checkpoint; Delta holds every record once.

This module has its own broker (the ``broker`` fixture is per module), so restarting it does not
disturb other modules."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from pyspark_log.delta import delta_sink
from pyspark_log.embedded import EmbeddedBroker
from spark_tests.helpers import Kafka, stream, wait_until

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("stop_queries")]


def rows_in(table: Path) -> int:
    return (
        DeltaTable(str(table)).to_pyarrow_table(columns=["offset"]).num_rows if (table / "_delta_log").exists() else 0
    )


def keys_in(table: Path) -> list[tuple[int, int]]:
    data = DeltaTable(str(table)).to_pyarrow_table(columns=["partition", "offset"]).to_pylist()
    return [(r["partition"], r["offset"]) for r in data]


def test_query_survives_broker_restart_and_crash(
    spark, broker: EmbeddedBroker, kafka: Kafka, topic: str, tmp_path: Path
) -> None:
    kafka.create(topic, 2)
    kafka.produce_spread(topic, 2, 100, "before")
    table, chk = tmp_path / "table", tmp_path / "chk"

    def start():
        df = stream(spark, kafka.servers, subscribe=topic, startingOffsets="earliest")
        return (
            df.writeStream.foreachBatch(delta_sink(str(table)))
            .option("checkpointLocation", str(chk))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    query = start()
    wait_until(lambda: rows_in(table) == 100, 90, "the first 100 records")
    restarts = 0

    def landed(expected: int):
        """Wait for ``expected`` rows; if the query failed meanwhile, check the error names the
        broker problem and start it again from its checkpoint."""
        nonlocal query, restarts

        def check() -> bool:
            nonlocal query, restarts
            if not query.isActive:
                error = query.exception()
                assert error is not None
                assert any(word in str(error) for word in ("broker", "connect", "fetch", "offsets")), str(error)
                restarts += 1
                query = start()
            return rows_in(table) >= expected

        wait_until(check, 120, f"{expected} records in the Delta table")

    broker.restart()  # clean: SIGTERM, then the same port and data directory
    kafka.produce_spread(topic, 2, 100, "after-restart")
    landed(200)

    broker.kill()  # a crash: SIGKILL, no flush (acked data is in the OS page cache)
    broker.start()
    kafka.produce_spread(topic, 2, 100, "after-crash")
    landed(300)
    query.stop()

    keys = keys_in(table)
    assert len(keys) == len(set(keys)) == 300
    assert set(keys) == {(p, o) for p in (0, 1) for o in range(150)}
    assert restarts <= 2
