# Databricks notebook source
# MAGIC %md
# MAGIC # A CDC topic of customers → a Delta table that mirrors it
# MAGIC
# MAGIC A database's change feed lands in a **compacted** topic: each record is keyed by the customer id
# MAGIC and carries the row after the change as JSON; a delete is a *tombstone* (the key with a null
# MAGIC value). Compaction keeps at least the latest change of every customer, so a mirror can always be
# MAGIC rebuilt from offset 0.
# MAGIC
# MAGIC `pyspark_log.delta.delta_sink(..., mode="upsert")` applies each micro-batch to a Delta table with
# MAGIC one MERGE by key: the latest change of each customer in the batch (highest offset) updates or
# MAGIC inserts the row, a tombstone deletes it. The batch id is recorded in the same Delta commit (app
# MAGIC transaction), so a batch Spark replays after a crash is skipped: the mirror is exactly once.
# MAGIC On Databricks (Delta on Spark's classpath) the MERGE runs through delta-spark, locally through
# MAGIC delta-rs.
# MAGIC
# MAGIC On Databricks set the `table_path` and `checkpoint` widgets to durable locations (a Unity Catalog volume
# MAGIC or cloud storage path).
# MAGIC
# MAGIC **Settings.** On Databricks the notebook shows widgets (`bootstrap`, `topic`, …) and reads
# MAGIC credentials from `dbutils.secrets`; elsewhere it reads `PYLOG_BOOTSTRAP`, `PYLOG_TOPIC`, … from the
# MAGIC environment. For SASL_SSL set the `security_protocol` widget to `SASL_SSL`, `sasl_mechanism` (PLAIN,
# MAGIC SCRAM-SHA-256 or SCRAM-SHA-512), `secret_scope` to a secret scope holding `sasl_username` and
# MAGIC `sasl_password`, and `ssl_truststore_location` when the brokers' CA is not a public one. With no
# MAGIC bootstrap servers the notebook starts its own broker, only where Spark runs locally: on a cluster it
# MAGIC stops and names the setting.

# COMMAND ----------

import os

from pyspark_log.notebook import NotebookSettings

# Databricks widgets and secrets (dbutils) on Databricks, PYLOG_* environment variables elsewhere.
# Empty bootstrap: a local pylog broker is started for this notebook (local Spark only),
# and a sample change feed is produced.
settings = NotebookSettings(globals().get("dbutils"))
BOOTSTRAP = settings.get("bootstrap")  # e.g. "broker-1.example.com:9092"
TOPIC = settings.get("topic", "db.public.customers")
TABLE_PATH = settings.get("table_path", "")  # empty: a temporary directory
CHECKPOINT = settings.get("checkpoint", "")
# names this query's Delta app transaction; keep it with the checkpoint (Spark Connect, e.g.
# Databricks serverless, gives foreachBatch no query id to derive it from)
APP_ID = settings.get("app_id", "customers-mirror")

# COMMAND ----------

import sys
import tempfile

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the PySpark convention

import pyspark_log.spark
from pyspark_log.notebook import bootstrap_or_local_broker

try:
    spark  # noqa: B018 - Databricks and the pyspark shell define it
except NameError:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )

pyspark_log.spark.register(spark)  # makes format("pylog") known to this session

# no bootstrap servers: a broker of this notebook's own, where Spark runs locally (an error on a cluster)
BOOTSTRAP, local_broker = bootstrap_or_local_broker(spark, BOOTSTRAP)
KAFKA_OPTIONS = settings.kafka_options(BOOTSTRAP)  # bootstrap.servers and the kafka.* security options
print("broker:", BOOTSTRAP, "(local)" if local_broker else "")
workdir = tempfile.mkdtemp(prefix="pylog-nb-")
TABLE_PATH = TABLE_PATH or f"{workdir}/customers"
CHECKPOINT = CHECKPOINT or f"{workdir}/checkpoint"

# COMMAND ----------

import json
import random

from pyspark_log.client import AdminClient, NewTopic, Producer

database = {}  # the source database's customers table, as the sample feed leaves it


def produce_changes(count, seed):
    """Inserts, updates and deletes of customers, produced as they happen (local broker only)."""
    rng = random.Random(seed)
    with Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 5}) as producer:
        for step in range(count):
            customer_id = f"cust-{rng.randrange(150):04d}"
            if customer_id in database and rng.random() < 0.15:
                del database[customer_id]
                producer.send(TOPIC, None, key=customer_id)  # tombstone: the row was deleted
                continue
            row = database.get(customer_id) or {"customer_id": customer_id, "name": f"Customer {customer_id[5:]}"}
            row = {**row, "email": f"{customer_id}+{step}@example.com", "country": rng.choice(["DE", "US", "JP"])}
            database[customer_id] = row
            producer.send(TOPIC, json.dumps(row), key=customer_id)
        producer.flush()


if local_broker:
    with AdminClient({"bootstrap.servers": BOOTSTRAP}) as admin:
        if TOPIC not in admin.list_topics():
            admin.create_topics([NewTopic(TOPIC, 3, 1, config={"cleanup.policy": "compact"})])
    produce_changes(1200, seed=1)

# COMMAND ----------

from pyspark_log.delta import delta_sink, delta_spark_available
from pyspark_log.spark.available_now import run_available_now

CUSTOMER = "customer_id string, name string, email string, country string"


def to_rows(df):
    """The row after the change, keyed by the record key (a tombstone has only the key)."""
    after = F.from_json(F.col("value").cast("string"), CUSTOMER)
    return df.select(
        F.col("key").cast("string").alias("customer_id"),
        after["name"].alias("name"),
        after["email"].alias("email"),
        after["country"].alias("country"),
    )


def run_mirror():
    sink = delta_sink(TABLE_PATH, app_id=APP_ID, mode="upsert", key_columns=["customer_id"], transform=to_rows)
    # Trigger.AvailableNow: the whole backlog in batches of maxOffsetsPerTrigger (run_available_now
    # restarts the query from its checkpoint on PySpark 4.0/4.1, Databricks Runtime 17/18)
    return run_available_now(
        lambda: (
            spark.readStream.format("pylog")
            .options(**KAFKA_OPTIONS)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")  # used by the first run only
            .option("maxOffsetsPerTrigger", "500")
            .load()
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", CHECKPOINT)
            .trigger(availableNow=True)
            .start()
        )
    )


def mirror():
    if delta_spark_available(spark):
        return spark.read.format("delta").load(TABLE_PATH)
    from deltalake import DeltaTable

    return spark.createDataFrame(DeltaTable(TABLE_PATH).to_pandas())


runs = run_mirror()
print("batches:", [p["numInputRows"] for q in runs for p in q.recentProgress if p["numInputRows"]])
print("customers in the mirror:", mirror().count())

# COMMAND ----------

# MAGIC %md
# MAGIC More changes arrive (updates, deletes, customers coming back); the same query (same
# MAGIC checkpoint) applies only those.

# COMMAND ----------

if local_broker:
    produce_changes(400, seed=2)
run_mirror()
table = mirror()
print("customers in the mirror:", table.count())
print("duplicate keys:", table.groupBy("customer_id").count().where("count > 1").count())
if local_broker:
    rows = {r["customer_id"]: r.asDict() for r in table.collect()}
    print("mirror matches the source:", rows == database)
table.groupBy("country").count().orderBy("country").show()

# COMMAND ----------

if local_broker:
    local_broker.close()
