# Databricks notebook source
# MAGIC %md
# MAGIC # pylog quick start: `format("pylog")` in batch and streaming
# MAGIC
# MAGIC Reads a topic of a pylog (or any Kafka-protocol) broker with Spark: a batch read, JSON values
# MAGIC parsed with `from_json`, and a streaming query.
# MAGIC
# MAGIC * **Locally** the notebook starts its own broker and produces sample page views.
# MAGIC * **On Databricks** install the package on the cluster (`%pip install pyspark-pylog`) and set
# MAGIC   the `bootstrap` widget (and `topic`) — nothing else changes.
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

# COMMAND ----------

import sys

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

# MAGIC %md
# MAGIC ## Batch read
# MAGIC The Kafka connector's schema: `key`, `value` (binary), `topic`, `partition`, `offset`, `timestamp`, `timestampType` (+ `headers` with `includeHeaders=true`).

# COMMAND ----------

df = (
    spark.read.format("pylog")
    .options(**KAFKA_OPTIONS)
    .option("subscribe", TOPIC)
    .option("includeHeaders", "true")
    .load()
)
df.printSchema()
print("records:", df.count())
df.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset").show(
    5, truncate=60
)

# COMMAND ----------

# MAGIC %md
# MAGIC ## JSON values

# COMMAND ----------

EVENT_SCHEMA = "user_id string, page string, duration_ms long, ts long"
events = df.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"), "timestamp")
events = events.select("e.*", "timestamp")
top_pages = events.groupBy("page").agg(F.count("*").alias("views")).orderBy(F.desc("views"))
top_pages.show()

# COMMAND ----------

# MAGIC %md
# MAGIC ## Streaming
# MAGIC A stream starts at `latest` unless told otherwise; here it starts at `earliest` and writes to an in-memory table.

# COMMAND ----------

stream = (
    spark.readStream.format("pylog")
    .options(**KAFKA_OPTIONS)
    .option("subscribe", TOPIC)
    .option("startingOffsets", "earliest")
    .load()
)
query = (
    stream.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
    .groupBy("e.page")
    .count()
    .writeStream.outputMode("complete")
    .format("memory")
    .queryName("quickstart_page_counts")
    .start()
)
query.processAllAvailable()
spark.table("quickstart_page_counts").orderBy(F.desc("count")).show()
query.stop()

# COMMAND ----------

if local_broker:
    local_broker.close()
