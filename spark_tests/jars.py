"""Spark's own Kafka connector (``format("kafka")``) for the Spark tier, from Maven Central.

The checked-in recipe ``refs/spark/pom.xml`` names the connector and the run-time jars it needs
that PySpark's ``pyspark/jars`` does not ship (kafka-clients, spark-token-provider-kafka-0-10,
commons-pool2); ``./dev refs`` fetches them into the ignored cache ``.refs/spark/libs``, and
``reference_jars()`` runs the same recipe when the cache is empty (as ``tests.apache_kafka
.kafka_libs`` does for Apache Kafka). The tier's session passes the files as ``spark.jars``: no
Ivy resolution (``spark.jars.packages``) at run time.

Versions: PySpark is 4.3.0, but Maven Central serves no ``spark-sql-kafka-0-10_2.13:4.3.0``; the
4.2.0 connector runs on Spark 4.3.0 and is the one tested (docs/compatibility.md). Delta Lake's
JVM jars are not fetched by that recipe: delta-spark 4.4.0 (built against Spark 4.2.0) fails its
first snapshot read on Spark 4.3.0 (see the recipe). ``delta_jars()`` (``refs/delta40/pom.xml``)
gives delta-spark 4.0 to a PySpark 4.0 session (the oldest-PySpark venv).
"""

from __future__ import annotations

from pathlib import Path

from tests.refs_cache import RefsUnavailable, cached_jars

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".refs" / "spark" / "libs"
CONNECTOR_GLOB = "spark-sql-kafka-0-10_2.13-*.jar"


class ConnectorUnavailable(RefsUnavailable):
    """Spark's Kafka connector could not be had (no Maven, no network to Maven Central)."""


def reference_jars() -> list[Path]:
    """The jars of ``refs/spark/pom.xml`` in the cache, fetched by the recipe first if it is empty."""
    return sorted(cached_jars("spark", CONNECTOR_GLOB, ConnectorUnavailable).glob("*.jar"))


def connector_version() -> str:
    """The version of the cached connector jar (e.g. ``4.2.0``)."""
    jar = next(CACHE.glob(CONNECTOR_GLOB))
    return jar.stem.removeprefix("spark-sql-kafka-0-10_2.13-")


# -- Delta Lake (delta-spark) ------------------------------------------------------------------
# Delta's JVM jars run only on the Spark series they are built for: refs/delta40/pom.xml fetches
# delta-spark 4.0.x (built for Spark 4.0) and the Spark tier adds them, with Delta's session
# confs, where the running PySpark is a 4.0 (the oldest-PySpark venv that `./dev test` runs the
# core tests in). On newer PySpark the delta-spark tests skip with DELTA_SPARK_SKIP_REASON.
DELTA_GLOB = "delta-spark_2.13-*.jar"
DELTA_SPARK_SERIES = "4.0"
DELTA_SESSION_CONFS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


class DeltaUnavailable(RefsUnavailable):
    """Delta's jars do not run on this PySpark, or could not be fetched."""


def delta_jars(pyspark_version: str) -> list[Path]:
    """The jars of ``refs/delta40/pom.xml`` (fetched first when the cache is empty), or
    ``DeltaUnavailable`` when ``pyspark_version`` is not the Spark series they are built for."""
    series = ".".join(pyspark_version.split(".")[:2])
    if series != DELTA_SPARK_SERIES:
        raise DeltaUnavailable(
            f"delta-spark runs on Spark {DELTA_SPARK_SERIES} here (refs/delta40/pom.xml) and this is PySpark "
            f"{pyspark_version}: no Delta release runs on it yet (docs/compatibility.md); the delta-spark "
            "tests run in the oldest-PySpark venv (./dev test)"
        )
    return sorted(cached_jars("delta40", DELTA_GLOB, DeltaUnavailable).glob("*.jar"))
