"""``kcat -G group topic`` (librdkafka's balanced consumer) consumes as a group and resumes from the
offsets it committed."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest

from pyspark_log.embedded import EmbeddedBroker

from .groups_helpers import GROUP_BROKER_OVERRIDES, create_topic, produce, unique

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
pytestmark = pytest.mark.skipif(not shutil.which(KCAT), reason="kcat is not installed")


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with EmbeddedBroker(tmp_path_factory.mktemp("groups-kcat"), overrides=GROUP_BROKER_OVERRIDES) as broker:
        yield broker.bootstrap_servers


def kcat_group(bootstrap: str, group: str, topic: str) -> list[str]:
    """Consume as ``group`` until the end of every assigned partition (``-e``)."""
    done = subprocess.run(
        [KCAT, "-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%s\n", topic],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


def test_kcat_consumes_as_a_group_and_resumes_from_its_commits(bootstrap: str) -> None:
    topic, group = unique("kcat"), unique("g")
    create_topic(bootstrap, topic, 3)
    first = produce(bootstrap, topic, 30)
    assert sorted(kcat_group(bootstrap, group, topic)) == sorted(v.decode() for v in first)
    more = produce(bootstrap, topic, 6, start=30)
    assert sorted(kcat_group(bootstrap, group, topic)) == sorted(v.decode() for v in more)
