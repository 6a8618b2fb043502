"""``PylogDataSource``: the ``pylog`` format for ``spark.read`` / ``spark.readStream`` and, through
``writer.py``, for ``df.write`` / ``df.writeStream`` (exactly-once, transactional; see ``sink.py``).

Options are validated when the DataFrame is defined (``schema()``) and again, with the
batch/stream-specific rules, when Spark asks for a reader; every problem raises
``PylogOptionError`` naming the option and the fix. The schema is fixed (the Kafka connector's
columns, plus ``headers`` with includeHeaders=true); a user-supplied schema is rejected.

The reader, the writer and pyarrow are imported by the methods that return them: Spark imports
this module in a fresh Python process for every planning step (look-up, schema, reader/writer,
commit), and the look-up needs no more than the class.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from pyspark_log.spark.options import PylogOptionError, parse_options


def source_schema(include_headers: bool) -> StructType:
    """key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
    timestampType int [, headers array<struct<key string, value binary>>]: the Spark form of
    ``records.fetched.arrow_schema``, the one declaration the executors decode into."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from pyspark_log.records.fetched import arrow_schema

    return from_arrow_schema(arrow_schema(include_headers), prefer_timestamp_ntz=False)


def check_schema(given: StructType, include_headers: bool) -> None:
    """Reject a schema other than the source's own (what ``.schema(...)`` on the reader gives)."""
    expected = source_schema(include_headers)
    if given != expected:
        raise PylogOptionError(
            f"schema ({given.simpleString()}) is not the pylog source's fixed schema "
            f"({expected.simpleString()}): remove .schema(...) from the reader; set includeHeaders=true "
            "for the headers column and cast key/value with DataFrame operations"
        )


class PylogDataSource(DataSource):
    """``format("pylog")``: records of a pylog (or any Kafka-protocol) broker."""

    @classmethod
    def name(cls) -> str:
        return "pylog"

    def schema(self) -> StructType:
        return source_schema(parse_options(self.options).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_options(self.options, "batch")
        check_schema(schema, options.include_headers)
        from pyspark_log.spark.reader import PylogBatchReader

        return PylogBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - PySpark API name
        options = parse_options(self.options, "stream")
        check_schema(schema, options.include_headers)
        from pyspark_log.spark.reader import PylogStreamReader

        return PylogStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pyspark_log.spark.writer import batch_writer

        return batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802 - PySpark API name
        del overwrite  # complete and update output modes append, as in Spark's Kafka sink
        from pyspark_log.spark.writer import stream_writer

        return stream_writer(self.options, schema)
