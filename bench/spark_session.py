"""The local SparkSession the Spark benchmarks share: UI off, two shuffle partitions, 2 GB of
driver memory, no console progress, log level ERROR, ``format("pylog")`` registered. Python
workers run this interpreter (``PYSPARK_PYTHON``, set before pyspark starts its JVM)."""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(master: str, **confs: str) -> Any:
    """``SparkSession`` on ``master`` with the benchmarks' settings and ``confs`` on top."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import pyspark_log.spark as pylog_spark

    builder = (
        SparkSession.builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in confs.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    pylog_spark.register(spark)
    return spark
