"""KIP-595 "quorum.retry.backoff.ms / quorum.retry.backoff.max.ms": exponential request backoff
(KIP-580) and "quorum.request.timeout.ms"."""

from __future__ import annotations

from broker.raft.config import RaftConfig
from broker.raft.messages import FetchRequest
from broker.raft.requests import RequestManager, retry_backoff_ms
from tests.unit.raft.helpers import follow, make_core, sends

CONFIG = RaftConfig(node_id=1, voters=frozenset({1, 2}), retry_backoff_ms=20, retry_backoff_max_ms=1000)


def test_backoff_grows_exponentially_from_retry_backoff_ms_to_the_max() -> None:
    """ "Backoff grows exponentially from quorum.retry.backoff.ms" up to quorum.retry.backoff.max.ms."""
    assert [retry_backoff_ms(CONFIG, n) for n in range(8)] == [0, 20, 40, 80, 160, 320, 640, 1000]
    assert retry_backoff_ms(CONFIG, 100) == 1000


def test_request_times_out_after_request_timeout_ms_then_backs_off() -> None:
    """ "quorum.request.timeout.ms: the maximum time before a pending request is considered failed.\""""
    requests = RequestManager(CONFIG, first_correlation_id=5)
    correlation_id = requests.on_send(2, 0)
    assert not requests.is_ready(2, 0)
    assert requests.expire(1999) == []
    assert requests.expire(2000) == [2]
    assert not requests.match_response(2, correlation_id)  # too late
    assert not requests.is_ready(2, 2019)
    assert requests.is_ready(2, 2020)
    requests.on_send(2, 2020)
    requests.expire(4020)
    assert not requests.is_ready(2, 4059)
    assert requests.is_ready(2, 4060)


def test_only_the_in_flight_correlation_id_matches() -> None:
    requests = RequestManager(CONFIG, first_correlation_id=(1 << 31) - 1)
    first = requests.on_send(2, 0)
    assert not requests.match_response(2, first + 1)
    assert not requests.match_response(3, first)
    assert requests.match_response(2, first)
    assert not requests.match_response(2, first)  # a duplicate
    second = requests.on_send(2, 1)
    assert second == 0  # correlation ids wrap within int32


def test_disconnect_fails_the_request_and_retries_after_the_backoff() -> None:
    """ "These two settings are used for retriable request errors or disconnects": a follower
    whose Fetch connection broke retries after quorum.retry.backoff.ms, doubling each time."""

    core, _ = make_core(node_id=2)
    (request,) = sends(follow(core, 1, 3, 0), FetchRequest)
    assert not core.request_failed(1, request.correlation_id, 10).send
    assert core.request_failed(1, request.correlation_id, 11).is_empty()  # already failed
    assert not sends(core.tick(29), FetchRequest)
    (retry,) = sends(core.tick(30), FetchRequest)
    core.request_failed(1, retry.correlation_id, 31)
    assert not sends(core.tick(70), FetchRequest)
    assert sends(core.tick(71), FetchRequest)


def test_an_ended_backoff_is_still_a_deadline_until_a_poll_sees_it() -> None:
    """A driver that wakes after the backoff ended must still be told to tick once: otherwise the
    destination is never retried (an observer whose every voter refused would stay stuck)."""
    requests = RequestManager(CONFIG, first_correlation_id=0)
    requests.on_send(2, 0)
    requests.match_response(2, 0)
    requests.on_failure(2, 100)
    assert requests.next_deadline_ms(100) == 120
    assert requests.next_deadline_ms(500) == 120  # woke late: still due
    assert requests.expire(500) == []
    assert requests.next_deadline_ms(500) is None
    assert requests.is_ready(2, 500)
