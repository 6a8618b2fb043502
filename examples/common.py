"""Shared by the examples: a quiet local SparkSession, a broker (given or embedded), sample events.

Every example runs as ``python examples/NAME.py``. With ``PYLOG_BOOTSTRAP=host:port`` set it uses
that broker; otherwise it starts an embedded one (``pyspark_log.embedded.EmbeddedBroker``, a one-node
KRaft cluster: ``process.roles=broker,controller``, its own metadata quorum) on a
temporary directory and stops it at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark_log.client import AdminClient, NewTopic, Producer, TopicAlreadyExistsError
from pyspark_log.embedded import EmbeddedBroker

PAGES = ["/", "/products", "/products/42", "/cart", "/checkout", "/search", "/blog/delta-lake", "/about"]
PAGE_WEIGHTS = [30, 22, 12, 9, 5, 12, 6, 4]
COUNTRIES = ["DE", "FR", "US", "BR", "IN", "JP"]

_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


def spark_session(app_name: str) -> Any:
    """A local[2] session that prints only errors, with ``format("pylog")`` registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    log4j = Path(tempfile.gettempdir()) / "pylog-examples-log4j2.properties"
    log4j.write_text(_QUIET_LOG4J)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import pyspark_log.spark as pylog_spark

    pylog_spark.register(spark)
    return spark


@contextlib.contextmanager
def broker(workdir: Path | None = None) -> Iterator[str]:
    """Yield bootstrap servers: ``$PYLOG_BOOTSTRAP`` or an embedded broker's."""
    given = os.environ.get("PYLOG_BOOTSTRAP")
    if given:
        yield given
        return
    with EmbeddedBroker(workdir / "broker" if workdir else None, kraft=True) as embedded:
        yield embedded.bootstrap_servers


def create_topic(servers: str, topic: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": servers}) as admin, contextlib.suppress(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(topic, partitions, 1)])


def page_view(rng: random.Random, now_ms: int) -> tuple[bytes, bytes, list[tuple[str, bytes]], int]:
    """(key, JSON value, headers, timestamp) of one page view."""
    user = f"user-{rng.randrange(500):03d}"
    event = {
        "user_id": user,
        "page": rng.choices(PAGES, PAGE_WEIGHTS)[0],
        "country": rng.choice(COUNTRIES),
        "duration_ms": int(rng.expovariate(1 / 4000)),
        "ts": now_ms,
    }
    headers = [("source", rng.choice([b"web", b"web", b"ios", b"android"])), ("schema", b"page_view/v1")]
    return user.encode(), json.dumps(event).encode(), headers, now_ms


def produce_page_views(servers: str, topic: str, count: int, *, seed: int = 7) -> float:
    """Send ``count`` page views keyed by user (so a user's views stay in order); returns seconds."""
    rng = random.Random(seed)
    start = time.perf_counter()
    now_ms = int(time.time() * 1000) - count * 10
    with Producer({"bootstrap.servers": servers, "linger.ms": 10}) as producer:
        for i in range(count):
            key, value, headers, ts = page_view(rng, now_ms + i * 10)
            producer.send(topic, value, key=key, headers=headers, timestamp_ms=ts)
        producer.flush()
    return time.perf_counter() - start


def workdir(name: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"pylog-{name}-"))
