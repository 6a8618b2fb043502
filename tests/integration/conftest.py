"""Integration fixtures: a real ``pylog-broker`` process on a free loopback port.

``broker`` is shared by a module's tests (topics get unique names per test via ``topic_name``);
``fresh_broker`` is a broker of one test's own, for tests that restart or kill it.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pyspark_log.embedded import EmbeddedBroker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    data_dir = tmp_path_factory.mktemp("broker")
    with EmbeddedBroker(data_dir, python=sys.executable) as b:
        yield b


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(tmp_path / "broker", python=sys.executable) as b:
        yield b


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"{base}-{uuid.uuid4().hex[:8]}"
