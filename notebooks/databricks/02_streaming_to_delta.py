# Databricks notebook source
# MAGIC %md
# MAGIC # Streaming into Delta, exactly once
# MAGIC
# MAGIC A Structured Streaming query reads the topic with `format("pylog")` and appends each micro-batch
# MAGIC to a Delta table with `pyspark_log.delta.delta_sink`: on Databricks (Delta on Spark's classpath)
# MAGIC through delta-spark's idempotent writes (`txnAppId`/`txnVersion`), locally through delta-rs. The
# MAGIC offsets live in the checkpoint; a micro-batch Spark replays after a crash is skipped, so every
# MAGIC record lands once. The query runs with `Trigger.AvailableNow`, twice: the second run resumes.
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
# and sample events are produced.
settings = NotebookSettings(globals().get("dbutils"))
BOOTSTRAP = settings.get("bootstrap")  # e.g. "broker-1.example.com:9092"
TOPIC = settings.get("topic", "page-views")
TABLE_PATH = settings.get("table_path", "")  # empty: a temporary directory
CHECKPOINT = settings.get("checkpoint", "")
# names this query's Delta app transaction; keep it with the checkpoint (Spark Connect, e.g.
# Databricks serverless, gives foreachBatch no query id to derive it from)
APP_ID = settings.get("app_id", "page-views-to-delta")

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
TABLE_PATH = TABLE_PATH or f"{workdir}/page_views"
CHECKPOINT = CHECKPOINT or f"{workdir}/checkpoint"

# COMMAND ----------

import json
import random
import time

from pyspark_log.client import AdminClient, NewTopic, Producer


def produce_sample_events(count, seed):
    """Page views as JSON, keyed by user, with a `source` header (local broker only)."""
    rng = random.Random(seed)
    pages = ["/", "/products", "/products/42", "/cart", "/checkout", "/search"]
    now_ms = int(time.time() * 1000)
    with Producer({"bootstrap.servers": BOOTSTRAP}) as producer:
        for i in range(count):
            user = f"user-{rng.randrange(300):03d}"
            event = {"user_id": user, "page": rng.choice(pages), "duration_ms": rng.randrange(100, 20000)}
            event["ts"] = now_ms + i
            producer.send(TOPIC, json.dumps(event), key=user, headers=[("source", rng.choice([b"web", b"ios"]))])
        producer.flush()


if local_broker:
    with AdminClient({"bootstrap.servers": BOOTSTRAP}) as admin:
        if TOPIC not in admin.list_topics():
            admin.create_topics([NewTopic(TOPIC, 3, 1)])
    produce_sample_events(1500, seed=1)

# COMMAND ----------

from pyspark_log.delta import delta_sink, delta_spark_available
from pyspark_log.spark.available_now import run_available_now

EVENT_SCHEMA = "user_id string, page string, duration_ms long, ts long"


def run_stream():
    events = (
        spark.readStream.format("pylog")
        .options(**KAFKA_OPTIONS)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")  # used by the first run only
        .option("maxOffsetsPerTrigger", "1000")
        .load()
        .select(
            F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"),
            "topic",
            "partition",
            "offset",
            "timestamp",
        )
        .select("e.*", "topic", "partition", "offset", "timestamp")
    )
    # Trigger.AvailableNow: the whole backlog in batches of maxOffsetsPerTrigger. PySpark 4.2+ runs
    # them in one query run; on 4.0/4.1 (Databricks Runtime 17/18) run_available_now restarts the
    # query from its checkpoint until nothing is left.
    return run_available_now(
        lambda: (
            events.writeStream.foreachBatch(delta_sink(TABLE_PATH, app_id=APP_ID))
            .option("checkpointLocation", CHECKPOINT)
            .trigger(availableNow=True)
            .start()
        )
    )


def table_rows():
    if delta_spark_available(spark):
        return spark.read.format("delta").load(TABLE_PATH).count()
    from deltalake import DeltaTable

    return DeltaTable(TABLE_PATH).to_pyarrow_table(columns=["offset"]).num_rows


runs = run_stream()
print("batches:", [p["numInputRows"] for q in runs for p in q.recentProgress if p["numInputRows"]])
print("rows in the table:", table_rows())

# COMMAND ----------

# MAGIC %md
# MAGIC More events arrive; the same query (same checkpoint) picks up where it stopped.

# COMMAND ----------

if local_broker:
    produce_sample_events(500, seed=2)
before = table_rows()
run_stream()
print(f"rows in the table: {before} -> {table_rows()}")

# COMMAND ----------

if delta_spark_available(spark):
    table = spark.read.format("delta").load(TABLE_PATH)
else:
    from deltalake import DeltaTable

    table = spark.createDataFrame(DeltaTable(TABLE_PATH).to_pandas())
dupes = table.groupBy("topic", "partition", "offset").count().where("count > 1").count()
print("duplicates:", dupes)
assert dupes == 0
table.groupBy("page").count().orderBy(F.desc("count")).show()

# COMMAND ----------

if local_broker:
    local_broker.close()
