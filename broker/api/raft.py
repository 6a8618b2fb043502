"""KIP-595 RPCs on the broker's listener: Vote (52), BeginQuorumEpoch (53), EndQuorumEpoch (54),
DescribeQuorum (55), FetchSnapshot (59, KIP-630), and Fetch of ``__cluster_metadata-0``
(``handle_metadata_fetch``, called by ``broker.api.fetch`` for v12+ requests that name only that
partition).

Each handler decodes the request into the Raft core's message (``broker.raft.rpc``), hands it to
the ``RaftDriver`` (``broker.raft``), and answers with the core's response once the core has made
whatever it decided durable (a granted vote is on disk before the VoteResponse leaves). A request
for another topic or partition is answered UNKNOWN_TOPIC_OR_PARTITION; one whose fields no replica
can act on (a negative fetch offset, ...) INVALID_REQUEST, without reaching the core. While the
driver is not running (shutting down, or stopped by a fatal error), or when too many Raft requests
wait already (``RaftBusyError``), the connection is closed, which the sender's core treats as a
failed request.

No authorization: like every API of pylog's one PLAINTEXT listener, these are open to any client
that can connect (docs/compatibility.md, "KIP-595 quorum at run time").

DescribeQuorum on a replica that is not the leader is forwarded to the leader, as Kafka's brokers
forward it to the active controller; without a known leader it answers NOT_LEADER_OR_FOLLOWER.

KIP-853 AddRaftVoter (80), RemoveRaftVoter (81), UpdateRaftVoter (82): the leader hands them to
the core (``RaftDriver.change_voters``), which decides with Kafka's refusal codes, and answers once
the new VotersRecord is committed (REQUEST_TIMED_OUT after the request's ``TimeoutMs``, or 30 s,
the Java admin client's default request timeout, for the two requests without one). Any other replica, a broker
included, forwards the request to the leader and passes its answer back, as Kafka's brokers
forward AddRaftVoter/RemoveRaftVoter to the active controller (NOT_LEADER_OR_FOLLOWER without a
reachable leader). A request naming another cluster id is answered INCONSISTENT_CLUSTER_ID.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from broker.api.context import Broker, Handler, Request
from broker.network.connection import CloseConnection
from broker.raft.driver import RaftBusyError, RaftDriver, RaftStoppedError
from broker.raft.log import VoterSpec
from broker.raft.rpc import InvalidRaftRequest, NotMetadataPartition, request_from_wire
from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import ErrorCode

log = logging.getLogger(__name__)
VOTER_CHANGE_TIMEOUT_MS = 30_000  # RemoveRaftVoter/UpdateRaftVoter carry no TimeoutMs: the admin client's default


def raft_handlers() -> dict[int, Handler]:
    """The KIP-595 APIs a broker with ``process.roles`` serves (Fetch stays Fetch's handler)."""
    return {
        ApiKey.VOTE: handle_vote,
        ApiKey.BEGIN_QUORUM_EPOCH: handle_begin_quorum_epoch,
        ApiKey.END_QUORUM_EPOCH: handle_end_quorum_epoch,
        ApiKey.DESCRIBE_QUORUM: handle_describe_quorum,
        ApiKey.FETCH_SNAPSHOT: handle_fetch_snapshot,  # KIP-630
        ApiKey.ADD_RAFT_VOTER: handle_add_raft_voter,
        ApiKey.REMOVE_RAFT_VOTER: handle_remove_raft_voter,
        ApiKey.UPDATE_RAFT_VOTER: handle_update_raft_voter,
    }


def _driver(broker: Broker) -> RaftDriver:
    driver = broker.raft
    if driver is None or not driver.running:
        raise CloseConnection("the metadata quorum is not running on this node")
    return driver


def _unknown_partition(request: Request) -> dict[str, Any]:
    """Every requested partition answered UNKNOWN_TOPIC_OR_PARTITION."""
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    topics = [
        {
            "topic_name": topic.topic_name,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": code, "leader_id": -1, "leader_epoch": -1}
                for p in topic.partitions
            ],
        }
        for topic in request.body.topics
    ]
    return {"error_code": 0, "topics": topics}


async def _serve(broker: Broker, request: Request) -> Mapping[str, Any]:
    driver = _driver(broker)
    api_key = request.header.api_key
    try:
        source, message = request_from_wire(api_key, request.version, request.body)
    except NotMetadataPartition:
        if api_key == ApiKey.FETCH_SNAPSHOT:
            return driver.error_body(api_key, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return _unknown_partition(request)
    except InvalidRaftRequest as exc:
        log.debug("invalid %s request from %s: %s", ApiKey(api_key).name, request.header.client_id, exc)
        return driver.error_body(api_key, ErrorCode.INVALID_REQUEST)
    try:
        return await driver.handle_request(source, message)
    except (RaftStoppedError, RaftBusyError) as exc:
        raise CloseConnection(str(exc)) from exc


def handle_vote(broker: Broker, request: Request) -> Any:
    return _serve(broker, request)


def handle_begin_quorum_epoch(broker: Broker, request: Request) -> Any:
    return _serve(broker, request)


def handle_end_quorum_epoch(broker: Broker, request: Request) -> Any:
    return _serve(broker, request)


async def handle_describe_quorum(broker: Broker, request: Request) -> Mapping[str, Any]:
    driver = _driver(broker)
    try:
        request_from_wire(ApiKey.DESCRIBE_QUORUM, request.version, request.body)
    except NotMetadataPartition:
        return _unknown_partition(request)
    return await driver.describe_quorum_anywhere()


def handle_fetch_snapshot(broker: Broker, request: Request) -> Any:
    """KIP-630 FetchSnapshot (59): a chunk of the leader's snapshot (``broker.raft.rpc``)."""
    return _serve(broker, request)


async def handle_metadata_fetch(broker: Broker, request: Request) -> Mapping[str, Any]:
    """Fetch v12+ of ``__cluster_metadata-0``: KIP-595 replication, served by the Raft core."""
    return await _serve(broker, request)


# -- KIP-853 voter changes -------------------------------------------------------------------------


def _voter_answer(api_key: int, code: int, message: str | None, driver: RaftDriver) -> dict[str, Any]:
    if api_key == ApiKey.UPDATE_RAFT_VOTER:
        return {
            "throttle_time_ms": 0,
            "error_code": int(code),
            "current_leader": {"leader_id": driver.leader_id, "leader_epoch": driver.epoch, "host": "", "port": 0},
        }
    return {"throttle_time_ms": 0, "error_code": int(code), "error_message": message}


def _controller_endpoint(listeners: Any) -> tuple[str, int] | None:
    """The endpoint a voter is reached at: its ``CONTROLLER`` listener, else its first one."""
    if not listeners:
        return None
    chosen = next((x for x in listeners if str(x["name"]).upper() == "CONTROLLER"), listeners[0])
    return str(chosen["host"]), int(chosen["port"])


async def _change_voters(broker: Broker, request: Request, operation: str) -> Mapping[str, Any]:
    driver = _driver(broker)
    api_key = request.header.api_key
    body = request.body
    timeout_ms = int(body.get("timeout_ms") or VOTER_CHANGE_TIMEOUT_MS)
    cluster_id = body.get("cluster_id")
    if cluster_id is not None and driver.cluster_id is not None and cluster_id != driver.cluster_id:
        return _voter_answer(
            api_key, ErrorCode.INCONSISTENT_CLUSTER_ID, f"cluster id {cluster_id!r} is not this cluster's", driver
        )
    if not driver.is_leader:
        answer = await driver.forward_to_leader(api_key, request.version, body, timeout_ms)
        if answer is None:
            return _voter_answer(
                api_key, ErrorCode.NOT_LEADER_OR_FOLLOWER, "no reachable leader of the KRaft quorum right now", driver
            )
        return dict(answer)
    directory_id = body["voter_directory_id"].bytes
    host, port = "", 0
    if operation != "remove":
        endpoint = _controller_endpoint(body.get("listeners"))
        if endpoint is None:
            return _voter_answer(api_key, ErrorCode.INVALID_REQUEST, "the voter must have a listener", driver)
        host, port = endpoint
    spec = VoterSpec(int(body["voter_id"]), directory_id, host, port)
    if spec.voter_id < 0:
        return _voter_answer(api_key, ErrorCode.INVALID_REQUEST, f"invalid voter id {spec.voter_id}", driver)
    try:
        code, message = await driver.change_voters(operation, spec, timeout_ms)
    except RaftStoppedError as exc:
        raise CloseConnection(str(exc)) from exc
    return _voter_answer(api_key, code, message, driver)


def handle_add_raft_voter(broker: Broker, request: Request) -> Any:
    return _change_voters(broker, request, "add")


def handle_remove_raft_voter(broker: Broker, request: Request) -> Any:
    return _change_voters(broker, request, "remove")


def handle_update_raft_voter(broker: Broker, request: Request) -> Any:
    return _change_voters(broker, request, "update")
