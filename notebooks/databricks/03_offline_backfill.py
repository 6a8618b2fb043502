# Databricks notebook source
# MAGIC %md
# MAGIC # Offline backfill / nightly load into Delta
# MAGIC
# MAGIC `pyspark_log.delta.load_to_delta` reads, as a batch, everything that arrived since its last run and
# MAGIC appends it in one Delta commit that also records the end offsets (commit metadata plus the
# MAGIC table's app-transaction version for `APP_ID`). Run it from a scheduled job: a failed run is
# MAGIC simply run again, a finished run is never repeated, and no state lives outside the table.
# MAGIC
# MAGIC The first run starts at `startingOffsets` (default `earliest`); pass `startingTimestamp` to
# MAGIC backfill from a point in time. `max_offsets_per_load` splits a large backlog into several commits.
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
APP_ID = settings.get("app_id", "nightly-page-views")

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
TABLE_PATH = TABLE_PATH or tempfile.mkdtemp(prefix="pylog-backfill-") + "/page_views"

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

from pyspark_log.delta import last_load, load_to_delta

EVENT_SCHEMA = "user_id string, page string, duration_ms long, ts long"

SOURCE = {**KAFKA_OPTIONS, "subscribe": TOPIC, "startingOffsets": "earliest"}


def parse(df):
    return df.select(
        F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"), "topic", "partition", "offset"
    ).select("e.*", "topic", "partition", "offset")


result = load_to_delta(spark, SOURCE, TABLE_PATH, app_id=APP_ID, transform=parse, max_offsets_per_load=1000)
print(f"load {result.load_number}: {result.rows} rows, offsets {result.start_offsets} -> {result.end_offsets}")

# COMMAND ----------

# MAGIC %md
# MAGIC Running it again right away loads nothing; after new events arrive it loads only those.

# COMMAND ----------

again = load_to_delta(spark, SOURCE, TABLE_PATH, app_id=APP_ID, transform=parse)
print("loaded anything:", again.loaded)
if local_broker:
    produce_sample_events(300, seed=3)
nightly = load_to_delta(spark, SOURCE, TABLE_PATH, app_id=APP_ID, transform=parse)
print(f"load {nightly.load_number}: {nightly.rows} rows")
print("recorded in the table:", last_load(spark, APP_ID, TABLE_PATH))

# COMMAND ----------

if local_broker:
    local_broker.close()
