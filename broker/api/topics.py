"""Topic auto-creation shared by Metadata and Produce (``auto.create.topics.enable``)."""

from __future__ import annotations

import logging

from broker.api.context import Broker
from broker.controller.errors import MetadataError
from broker.metadata.image import TopicImage
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)


async def auto_create(broker: Broker, name: str) -> tuple[TopicImage | None, int]:
    """Create ``name`` with the broker defaults; return ``(topic, error_code)``.

    A concurrent creation of the same topic is success. An illegal name gives its error code.
    """
    existing = broker.image().topics.get(name)
    if existing is not None:
        return existing, 0
    try:
        topic = await broker.controller.create_topic(
            name,
            int(broker.config["num.partitions"]),
            int(broker.config["default.replication.factor"]),
            {},
        )
    except MetadataError as exc:
        if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return broker.image().topics.get(name), 0
        return None, exc.code
    log.info("auto-created topic %s with %d partition(s)", name, len(topic.partitions))
    return topic, 0


def auto_create_enabled(broker: Broker) -> bool:
    return bool(broker.config["auto.create.topics.enable"])
