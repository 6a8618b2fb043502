"""The group requests a member sends and how it reads their answers (bodies per Kafka 3.7 schemas;
``BrokerConnection`` picks the version and the codec drops fields that version lacks).

Error handling of JoinGroup/SyncGroup answers, as Kafka's consumer: MEMBER_ID_REQUIRED → join
again with the given member id; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION → forget member id and
generation, join again; REBALANCE_IN_PROGRESS → join again; NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE → find the coordinator again (retriable); anything else (FENCED_INSTANCE_ID,
INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT, GROUP_MAX_SIZE_REACHED …) is fatal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from pyspark_log.client.cluster import Cluster
from pyspark_log.client.errors import error_for
from pyspark_log.client.group.assignors import Assignor, MemberSubscription
from pyspark_log.client.group.link import CoordinatorLink
from pyspark_log.client.group.state import Membership
from pyspark_log.client.groups import OffsetAndMetadata
from pyspark_log.client.offset_commit import offset_commit_body
from pyspark_log.client.types import TopicPartition
from pyspark_log.wire import ApiKey, ErrorCode, Message
from pyspark_log.wire.consumer_protocol import (
    PROTOCOL_TYPE,
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from pyspark_log.wire.errors import DecodeError

JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP = (
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
)
OFFSET_COMMIT, OFFSET_FETCH = ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH
_REJOIN_RESET = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION})


class OffsetsMember(Protocol):
    """What the OffsetFetch requests read of a member (either membership: ``member.GroupMemberBase``,
    which imports this module; so this one names no type of it)."""

    @property
    def group_id(self) -> str: ...

    @property
    def link(self) -> CoordinatorLink: ...


class GroupMember(OffsetsMember, Protocol):
    """What the classic-protocol requests read of the member (``membership.ConsumerGroup``)."""

    @property
    def instance_id(self) -> str | None: ...

    @property
    def session_timeout_ms(self) -> int: ...

    @property
    def rebalance_timeout_ms(self) -> int: ...

    @property
    def assignors(self) -> Sequence[Assignor]: ...

    @property
    def membership(self) -> Membership: ...

    @property
    def cluster(self) -> Cluster: ...


class RejoinNow(Exception):
    """Send JoinGroup again at once (not an error the user sees)."""


# -- JoinGroup / SyncGroup -----------------------------------------------------------------------


def join_body(group: GroupMember, topics: Iterable[str], owned: list[TopicPartition]) -> dict[str, Any]:
    m = group.membership
    metadata = encode_subscription(
        Subscription(tuple(sorted(topics)), None, tuple((tp.topic, tp.partition) for tp in owned), m.generation_id)
    )
    return {
        "group_id": group.group_id,
        "session_timeout_ms": group.session_timeout_ms,
        "rebalance_timeout_ms": group.rebalance_timeout_ms,
        "member_id": m.member_id,
        "group_instance_id": group.instance_id,
        "protocol_type": PROTOCOL_TYPE,
        "protocols": [{"name": a.name, "metadata": metadata} for a in group.assignors],
        "reason": None,
    }


def _check_common(group: GroupMember, code: int, what: str) -> None:
    if code in _REJOIN_RESET:
        group.membership.reset()
        raise RejoinNow
    if code == ErrorCode.REBALANCE_IN_PROGRESS:
        raise RejoinNow
    group.link.on_error(code)
    raise error_for(code, context=f"{what} of group {group.group_id!r}")


def check_join(group: GroupMember, resp: Message) -> None:
    code = resp.error_code
    if code == ErrorCode.NONE:
        return
    if code == ErrorCode.MEMBER_ID_REQUIRED:
        group.membership.member_id = resp.member_id
        raise RejoinNow
    _check_common(group, code, "JoinGroup")


def check_sync(group: GroupMember, resp: Message) -> Assignment:
    code = resp.error_code
    if code != ErrorCode.NONE:
        _check_common(group, code, "SyncGroup")
    try:
        return decode_assignment(resp.assignment or b"")
    except DecodeError as exc:
        raise error_for(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"unreadable assignment: {exc}") from exc


async def leader_assign(
    group: GroupMember, protocol: str | None, members: list[Message]
) -> tuple[dict[str, bytes], dict[str, int]]:
    """The leader's assignment of every member (encoded), and the partition counts it used."""
    assignor = next((a for a in group.assignors if a.name == protocol), None)
    if assignor is None:
        raise error_for(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"the coordinator chose unknown assignor {protocol!r}")
    subscriptions: dict[str, MemberSubscription] = {}
    for member in members:
        try:
            sub = decode_subscription(member.metadata)
        except DecodeError:
            sub = Subscription(())
        owned = tuple(TopicPartition(t, p) for t, p in sub.owned_partitions)
        subscriptions[member.member_id] = MemberSubscription(
            member.member_id, sub.topics, member.group_instance_id, owned, sub.generation_id
        )
    topics = {t for s in subscriptions.values() for t in s.topics}
    cluster = group.cluster
    if cluster.add_topics(topics) or any(t not in cluster.metadata.topics for t in topics):
        await cluster.refresh()
    counts = {t: cluster.metadata.partition_count(t) or 0 for t in topics}
    result = assignor.assign({t: n for t, n in counts.items() if n}, subscriptions)
    encoded = {
        member_id: encode_assignment(Assignment(tuple((tp.topic, tp.partition) for tp in tps)))
        for member_id, tps in result.items()
    }
    return encoded, counts


def sync_body(group: GroupMember, protocol: str | None, assignments: Mapping[str, bytes]) -> dict[str, Any]:
    m = group.membership
    return {
        "group_id": group.group_id,
        "generation_id": m.generation_id,
        "member_id": m.member_id,
        "group_instance_id": group.instance_id,
        "protocol_type": PROTOCOL_TYPE,
        "protocol_name": protocol,
        "assignments": [{"member_id": k, "assignment": v} for k, v in assignments.items()],
    }


# -- Heartbeat / LeaveGroup ----------------------------------------------------------------------


def heartbeat_body(group: GroupMember) -> dict[str, Any]:
    m = group.membership
    return {
        "group_id": group.group_id,
        "generation_id": m.generation_id,
        "member_id": m.member_id,
        "group_instance_id": group.instance_id,
    }


def leave_body(group: GroupMember, reason: str) -> dict[str, Any]:
    member_id = group.membership.member_id
    return {
        "group_id": group.group_id,
        "member_id": member_id,
        "members": [{"member_id": member_id, "group_instance_id": group.instance_id, "reason": reason}],
    }


# -- offsets -------------------------------------------------------------------------------------


def commit_body(group: GroupMember, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]) -> dict[str, Any]:
    """OffsetCommit with the member's generation (``offset_commit.offset_commit_body``)."""
    m = group.membership
    return offset_commit_body(group.group_id, m.generation_id, m.member_id, group.instance_id, offsets)


def first_commit_error(resp: Message) -> int:
    """The most telling error of a commit's partitions (coordinator and generation errors first)."""
    codes = [ErrorCode.of(p.error_code) for t in resp.topics for p in t.partitions if p.error_code]
    for code in codes:
        if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, *_REJOIN_RESET):
            return code
    return codes[0] if codes else ErrorCode.NONE


def fetch_body(group: OffsetsMember, partitions: Iterable[TopicPartition]) -> dict[str, Any]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return {
        "group_id": group.group_id,
        "topics": [{"name": t, "partition_indexes": sorted(ps)} for t, ps in by_topic.items()],
        "require_stable": True,
    }


def parse_fetch(group: OffsetsMember, resp: Message) -> dict[TopicPartition, OffsetAndMetadata]:
    if resp.error_code != ErrorCode.NONE:
        group.link.on_error(resp.error_code)
        raise error_for(resp.error_code, context=f"fetch offsets of group {group.group_id!r}")
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic in resp.topics:
        for part in topic.partitions:
            tp = TopicPartition(topic.name, part.partition_index)
            if part.error_code not in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                group.link.on_error(part.error_code)
                raise error_for(part.error_code, context=f"fetch offset of {tp} for {group.group_id!r}")
            if part.error_code == ErrorCode.NONE and part.committed_offset >= 0:
                epoch = part.committed_leader_epoch if part.committed_leader_epoch >= 0 else None
                out[tp] = OffsetAndMetadata(part.committed_offset, part.metadata, epoch)
    return out
