"""``pyspark_log.DefaultSource``: the name PySpark's data source lookup registers from an installed
``pyspark_*`` module, resolved lazily so that ``import pyspark_log`` stays free of pyspark."""

from __future__ import annotations

import pytest

import pyspark_log
from pyspark_log.spark.source import PylogDataSource

pytestmark = pytest.mark.unit


def test_default_source_is_the_pylog_data_source() -> None:
    assert pyspark_log.DefaultSource is PylogDataSource
    assert pyspark_log.DefaultSource.name() == "pylog"


def test_other_attributes_still_raise() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        pyspark_log.Nope  # noqa: B018


def test_client_names_resolve_on_first_use() -> None:
    import pyspark_log.client as client

    assert set(client.__all__) == set(client._EXPORTS)
    for name in client.__all__:
        assert getattr(client, name).__name__ == name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        client.Nope  # noqa: B018
