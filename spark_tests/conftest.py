"""Spark tier fixtures: one local[2] SparkSession per test session, one broker process per module.

``spark``   the session (``format("pylog")`` registered; Python workers use this interpreter;
            Spark's own ``format("kafka")`` on the classpath from ``spark_tests.jars``; on
            PySpark 4.0 also delta-spark 4.0's jars and Delta's session confs).
``delta_engine``  parametrises a test over "delta-rs" and "delta-spark" (skipped, with the reason,
            where Delta's jars do not run on this PySpark).
``broker``  an ``EmbeddedBroker`` shared by a module's tests; retention checks run every 200 ms
            so tests can create topics with short ``retention.ms`` and see data deleted.
``kafka``   a ``Kafka`` helper on ``broker`` (create topics, produce, offsets); ``topic`` a fresh
            topic name per test.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_log.embedded import EmbeddedBroker
from spark_tests.helpers import Kafka
from spark_tests.jars import DELTA_SESSION_CONFS, ConnectorUnavailable, DeltaUnavailable, delta_jars, reference_jars

BROKER_OVERRIDES = {"log.retention.check.interval.ms": "200", "log.segment.delete.delay.ms": "0"}
DELTA_SPARK_SKIP: list[str] = []  # why the session has no delta-spark (set by the spark fixture)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    import pyspark
    from pyspark.sql import SparkSession

    import pyspark_log.spark as pylog_spark

    warehouse = tmp_path_factory.mktemp("warehouse")
    try:
        jars = ",".join(str(jar) for jar in reference_jars())
    except ConnectorUnavailable:  # the tests of format("kafka") fail with the reason; the rest run
        jars = ""
    builder = SparkSession.builder
    try:  # delta-spark where its jars run on this PySpark (4.0); elsewhere delta_engine skips it
        jars = ",".join([*filter(None, [jars]), *(str(jar) for jar in delta_jars(pyspark.__version__))])
        for key, value in DELTA_SESSION_CONFS.items():
            builder = builder.config(key, value)
    except DeltaUnavailable as exc:
        DELTA_SPARK_SKIP.append(str(exc))
    session = (
        builder.master("local[2]")
        .appName("pylog-spark-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .config("spark.python.worker.reuse", "true")
        # Python workers connect back over a Unix socket (Spark 4.1+; 4.0 ignores the key). Over
        # loopback TCP, any process of a parallel test that connects to the port Spark's worker
        # server was just given (a client still retrying a stopped broker's port) is accepted
        # first, and Spark fails the query: "Python worker failed to connect back. Authentication
        # failed."
        .config("spark.python.unix.domain.socket.enabled", "true")
        .config("spark.jars", jars)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    pylog_spark.register(session)
    yield session
    for query in session.streams.active:
        query.stop()
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), python=sys.executable, overrides=BROKER_OVERRIDES) as b:
        yield b


@pytest.fixture(scope="module")
def kafka(broker: EmbeddedBroker) -> Iterator[Kafka]:
    helper = Kafka(broker)
    yield helper
    helper.close()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40].strip("-")
    return f"{base}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def stop_queries(spark: object) -> Iterator[None]:
    """Stop every query a test left running (a failed assertion must not leak a query)."""
    yield
    for query in spark.streams.active:  # type: ignore[attr-defined]
        query.stop()


@pytest.fixture
def chk(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"


@pytest.fixture(params=["delta-rs", "delta-spark"])
def delta_engine(request: pytest.FixtureRequest, spark: object) -> str:
    """The Delta engine a test writes with (``delta_sink(engine=...)``); delta-spark only where the
    session has Delta's jars (PySpark 4.0), else the test skips with the reason."""
    if request.param == "delta-spark" and DELTA_SPARK_SKIP:
        pytest.skip(DELTA_SPARK_SKIP[0])
    return str(request.param)
