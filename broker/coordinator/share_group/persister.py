"""The persister (KIP-932 "Share-partition state persistence", Kafka's ``DefaultStatePersister``):
how a share-partition leader and the group coordinator reach the share coordinator of a
share-partition.

The share coordinator of ``(group, topic id, partition)`` is the leader of
``__share_group_state`` partition ``abs(hashCode("group:topicId:partition")) % partitions``
(what FindCoordinator key type 2, SHARE, answers for that key). When this broker leads it, the
call goes to the local ``ShareCoordinator``; otherwise the persister RPC
(Initialize/Read/Write/Delete ShareGroupState, ReadShareGroupStateSummary, v0) is sent to that
broker's inter-broker listener. Retriable answers (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT, a lost connection; the leader is moving or
restarting) are retried with a growing back-off, reading the leader from the metadata again,
for up to ``RETRY_DEADLINE_S``; anything else is the answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from broker.coordinator.share_group.coordinator import ShareCoordinator, StateKey, StateResult
from broker.coordinator.share_group.partition import StateBatch
from broker.coordinator.share_group.records import SHARE_STATE_TOPIC, PersistedState
from broker.coordinator.txn.sender import BrokerSender
from broker.metadata.image import MetadataImage
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import DecodeError, ErrorCode

log = logging.getLogger(__name__)

RETRY_DEADLINE_S = 30.0
RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


def _batches(entries: Any) -> tuple[StateBatch, ...]:
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in entries)


class Persister:
    """Sends each persister call to the share coordinator of its key (module docstring)."""

    def __init__(
        self,
        node_id: int,
        image: Callable[[], MetadataImage],
        coordinator: ShareCoordinator,
        sender: BrokerSender | None,
    ) -> None:
        self.node_id = node_id
        self.image = image
        self.coordinator = coordinator
        self.sender = sender

    async def initialize(self, key: StateKey, state_epoch: int, start_offset: int) -> StateResult:
        fields = {"state_epoch": state_epoch, "start_offset": start_offset}
        return await self._call(ApiKey.INITIALIZE_SHARE_GROUP_STATE, key, fields)

    async def read(self, key: StateKey, leader_epoch: int) -> StateResult:
        return await self._call(ApiKey.READ_SHARE_GROUP_STATE, key, {"leader_epoch": leader_epoch})

    async def write(self, key: StateKey, state: PersistedState) -> StateResult:
        fields = {
            "state_epoch": state.state_epoch,
            "leader_epoch": state.leader_epoch,
            "start_offset": state.start_offset,
            "state_batches": [b.__dict__ for b in state.batches],
        }
        return await self._call(ApiKey.WRITE_SHARE_GROUP_STATE, key, fields)

    async def delete(self, key: StateKey) -> StateResult:
        return await self._call(ApiKey.DELETE_SHARE_GROUP_STATE, key, {})

    async def summary(self, key: StateKey) -> StateResult:
        return await self._call(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, key, {"leader_epoch": -1})

    # -- routing -------------------------------------------------------------------------------------

    async def _call(self, api: ApiKey, key: StateKey, fields: dict[str, Any]) -> StateResult:
        deadline = time.monotonic() + RETRY_DEADLINE_S
        backoff = 0.05
        while True:
            topic = self.image().topics.get(SHARE_STATE_TOPIC)
            if topic is None or not topic.partitions:  # never created: no share-partition has state
                return _no_state_topic(api)
            result = await self._once(api, key, fields)
            if result.code not in RETRIABLE or time.monotonic() + backoff > deadline:
                return result
            await asyncio.sleep(backoff)  # the state partition's leader is moving: look again
            backoff = min(backoff * 2, 1.0)

    async def _once(self, api: ApiKey, key: StateKey, fields: dict[str, Any]) -> StateResult:
        image = self.image()
        topic = image.topics.get(SHARE_STATE_TOPIC)
        if topic is None or not topic.partitions:
            return StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{SHARE_STATE_TOPIC} does not exist yet.")
        self.coordinator.num_partitions = len(topic.partitions)
        sp = self.coordinator.partition_of(key)
        part = topic.partitions.get(sp)
        leader = part.leader if part is not None else -1
        if leader == self.node_id:
            return await self._local(api, key, fields)
        if leader < 0 or leader not in image.brokers or self.sender is None:
            return StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{SHARE_STATE_TOPIC}-{sp} has no leader.")
        broker = image.brokers[leader]
        return await self._remote(broker.host, broker.port, api, key, fields)

    async def _local(self, api: ApiKey, key: StateKey, fields: dict[str, Any]) -> StateResult:
        c = self.coordinator
        if api == ApiKey.INITIALIZE_SHARE_GROUP_STATE:
            return await c.initialize(key, fields["state_epoch"], fields["start_offset"])
        if api == ApiKey.READ_SHARE_GROUP_STATE:
            return c.read(key, fields["leader_epoch"])
        if api == ApiKey.WRITE_SHARE_GROUP_STATE:
            return await c.write(
                key, fields["state_epoch"], fields["leader_epoch"], fields["start_offset"],
                [StateBatch(**b) for b in fields["state_batches"]],
            )  # fmt: skip
        if api == ApiKey.DELETE_SHARE_GROUP_STATE:
            return await c.delete(key)
        return c.summary(key)

    async def _remote(self, host: str, port: int, api: ApiKey, key: StateKey, fields: dict[str, Any]) -> StateResult:
        group, topic_id, partition = key
        body = {
            "group_id": group,
            "topics": [{"topic_id": topic_id, "partitions": [{"partition": partition, **fields}]}],
        }
        assert self.sender is not None
        try:
            response = await self.sender.request(host, port, api, 0, body)
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            log.info("%s to %s:%s failed: %s", api.name, host, port, exc)
            return StateResult(ErrorCode.REQUEST_TIMED_OUT, str(exc))
        except (DecodeError, ValueError) as exc:
            log.warning("%s to %s:%s: unreadable response: %s", api.name, host, port, exc)
            return StateResult(ErrorCode.REQUEST_TIMED_OUT, str(exc))
        for result in response.results:
            if result.topic_id != topic_id:
                continue
            for p in result.partitions:
                if p.partition != partition:
                    continue
                if p.error_code != ErrorCode.NONE:
                    return StateResult(p.error_code, p.error_message)
                if api == ApiKey.READ_SHARE_GROUP_STATE:
                    state = PersistedState(p.state_epoch, -1, p.start_offset, _batches(p.state_batches))
                    return StateResult(state=state)
                if api == ApiKey.READ_SHARE_GROUP_STATE_SUMMARY:
                    return StateResult(state=PersistedState(p.state_epoch, p.leader_epoch, p.start_offset, ()))
                return StateResult()
        return StateResult(ErrorCode.UNKNOWN_SERVER_ERROR, f"{api.name}: no answer for the partition")


def _no_state_topic(api: ApiKey) -> StateResult:
    if api == ApiKey.DELETE_SHARE_GROUP_STATE:
        return StateResult()
    if api in (ApiKey.READ_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY):
        return StateResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The share-partition has no state.")
    return StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{SHARE_STATE_TOPIC} does not exist yet.")
