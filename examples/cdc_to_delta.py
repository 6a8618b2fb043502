"""A CDC topic of customers mirrored by a Delta table, exactly once (upsert mode).

A database's change feed (Debezium-style, flattened): each record is keyed by the customer id and
carries the customer's row after the change as JSON; a delete is a tombstone (the key with a null
value). The topic is compacted (``cleanup.policy=compact``): the broker keeps at least the latest
change of every customer, so a new mirror can always be built from offset 0.

The streaming query applies each micro-batch to the Delta table with one MERGE
(``delta_sink(..., mode="upsert", key_columns=["customer_id"])``): the latest change of each
customer in the batch updates or inserts the row, a tombstone deletes it, and the batch's id is
recorded in the same commit so a replayed batch is skipped. It runs twice over one checkpoint
with more changes in between, then checks the table against the source database's final state.

    python examples/cdc_to_delta.py [TABLE_PATH]
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
from pathlib import Path
from typing import Any

from common import broker, spark_session, workdir

from pyspark_log.client import AdminClient, NewTopic, Producer, TopicAlreadyExistsError
from pyspark_log.delta import delta_sink

TOPIC = "db.public.customers"
CUSTOMER = "customer_id string, name string, email string, country string, updated_at long"
COUNTRIES = ["DE", "FR", "US", "BR", "IN", "JP"]


def create_compacted_topic(servers: str) -> None:
    config = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}
    with AdminClient({"bootstrap.servers": servers}) as admin, contextlib.suppress(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(TOPIC, 3, 1, config=config)])


def change_feed(servers: str, database: dict[str, dict[str, Any]], count: int, seed: int) -> None:
    """``count`` changes to ``database`` (inserts, updates, deletes), each produced as it happens."""
    rng = random.Random(seed)
    with Producer({"bootstrap.servers": servers, "linger.ms": 5}) as producer:
        for step in range(count):
            customer_id = f"cust-{rng.randrange(200):04d}"
            if customer_id in database and rng.random() < 0.15:
                del database[customer_id]
                producer.send(TOPIC, None, key=customer_id)  # tombstone: the row was deleted
                continue
            row = database.get(customer_id) or {"customer_id": customer_id, "name": f"Customer {customer_id[5:]}"}
            row = {
                **row,
                "email": f"{customer_id}+{step}@example.com",
                "country": rng.choice(COUNTRIES),
                "updated_at": seed * 1_000_000 + step,
            }
            database[customer_id] = row
            producer.send(TOPIC, json.dumps(row), key=customer_id)
        producer.flush()


def to_rows(df):
    """The change's row, keyed by the record key (a tombstone has only the key)."""
    from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

    after = F.from_json(F.col("value").cast("string"), CUSTOMER)
    return df.select(
        F.col("key").cast("string").alias("customer_id"),
        after["name"].alias("name"),
        after["email"].alias("email"),
        after["country"].alias("country"),
        after["updated_at"].alias("updated_at"),
    )


def mirror_once(spark, servers: str, table: Path, checkpoint: Path) -> None:
    sink = delta_sink(str(table), mode="upsert", key_columns=["customer_id"], transform=to_rows)
    query = (
        spark.readStream.format("pylog")
        .option("bootstrap.servers", servers)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")  # only for the first run; later runs resume
        .option("maxOffsetsPerTrigger", "400")
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def main() -> None:
    work = workdir("cdc")
    table = Path(sys.argv[1]) if len(sys.argv) > 1 else work / "customers"
    checkpoint = work / "checkpoint"
    database: dict[str, dict[str, Any]] = {}
    with broker(work) as servers:
        create_compacted_topic(servers)
        spark = spark_session("pylog-cdc")
        change_feed(servers, database, 1500, seed=1)
        mirror_once(spark, servers, table, checkpoint)
        change_feed(servers, database, 500, seed=2)
        mirror_once(spark, servers, table, checkpoint)  # resumes where the first run stopped

        from deltalake import DeltaTable

        rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
        mirrored = {r["customer_id"]: r for r in rows}
        print(f"{table}: {len(rows)} customers, {len(rows) - len(mirrored)} duplicate keys")
        print("mirror equals the database:", mirrored == database)
        spark.stop()


if __name__ == "__main__":
    main()
