"""ApiVersions (KIP-511) of Apache Kafka 4.1.1 and pylog, API by API.

pylog advertises Apache Kafka 3.7's ranges (pyspark_log/wire/versions.py); Kafka 4 raised some
minimum versions (KIP-896 removed old protocol versions) and added APIs and versions. Every API
whose range differs, and every API only one broker serves, must be a row of the table
"ApiVersions" in docs/compatibility.md ("Differences found by the differential tier"), and every
row there must still be a difference.
"""

from __future__ import annotations

import re

from pyspark_log.embedded_cluster import request
from pyspark_log.wire import ApiKey
from tests.differential.conftest import Brokers
from tests.differential.documented import compare, table

HEADING = "ApiVersions"
NOT_SERVED = "-"


def advertised(address: str) -> dict[int, tuple[int, int]]:
    body = {"client_software_name": "pylog-differential", "client_software_version": "1.0"}
    answer = request(address, ApiKey.API_VERSIONS, 3, body)
    assert answer.error_code == 0
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def api_label(key: int) -> str:
    try:
        name = ApiKey(key).title
    except ValueError:
        name = "Unknown"
    return f"{name} ({key})"


def version_range(versions: tuple[int, int] | None) -> str:
    return NOT_SERVED if versions is None else f"{versions[0]}-{versions[1]}"


def normalise(row: list[str]) -> tuple[str, str, str]:
    """A documented row as (key, Kafka range, pylog range); en dashes read as hyphens."""
    label, kafka, pylog = (cell.replace("\u2013", "-") for cell in row)
    match = re.search(r"\((\d+)\)", label)
    assert match, f"ApiVersions row without an API key in parentheses: {row}"
    return match.group(1), kafka, pylog


def test_api_version_ranges_differ_only_where_documented(brokers: Brokers) -> None:
    kafka, pylog = advertised(brokers.kafka), advertised(brokers.pylog)
    observed = {
        (str(key), version_range(kafka.get(key)), version_range(pylog.get(key)))
        for key in set(kafka) | set(pylog)
        if kafka.get(key) != pylog.get(key)
    }
    documented = {normalise(row) for row in table(HEADING, 3)}
    message = compare(
        HEADING,
        {(api_label(int(k)), a, b) for k, a, b in observed},
        {(api_label(int(k)), a, b) for k, a, b in documented},
    )
    assert not message, message


def test_every_api_pylog_serves_overlaps_kafka_or_is_pylog_only(brokers: Brokers) -> None:
    """A client negotiating min(its max, broker max) finds a common version with both brokers
    for every API both serve: no range of pylog lies wholly outside Kafka's."""
    kafka, pylog = advertised(brokers.kafka), advertised(brokers.pylog)
    disjoint = {
        api_label(key): (kafka[key], pylog[key])
        for key in set(kafka) & set(pylog)
        if pylog[key][1] < kafka[key][0] or kafka[key][1] < pylog[key][0]
    }
    assert not disjoint
