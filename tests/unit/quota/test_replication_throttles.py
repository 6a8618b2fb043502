"""``broker.quota.replication``: which partitions a replication throttle covers, and when it
holds a replica back (KIP-73; Kafka's ReplicationQuotaManager)."""

from __future__ import annotations

import pytest

from broker.quota.replication import (
    ALL_PARTITIONS,
    UNLIMITED,
    ReplicationThrottles,
    throttle_rates,
    throttled_partitions,
)


def test_a_throttled_replicas_list_names_the_partitions_of_this_broker_only() -> None:
    assert throttled_partitions("0:1,1:2,2:1", 1) == {0, 2}
    assert throttled_partitions("0:1,1:2", 3) == frozenset()
    assert throttled_partitions(" * ", 7) is ALL_PARTITIONS
    assert throttled_partitions("", 1) == frozenset()


def test_rates_come_from_the_broker_over_the_cluster_default_and_are_unlimited_otherwise() -> None:
    configs = {"": {"leader.replication.throttled.rate": "100"}, "2": {"leader.replication.throttled.rate": "5"}}
    assert throttle_rates(configs, 2) == (5, UNLIMITED)
    assert throttle_rates(configs, 1) == (100, UNLIMITED)
    assert throttle_rates({}, 1) == (UNLIMITED, UNLIMITED)


class World:
    def __init__(self) -> None:
        self.now = 0
        self.topics = {
            "t": {"leader.replication.throttled.replicas": "0:1", "follower.replication.throttled.replicas": "1:1"}
        }
        self.brokers: dict[str, dict[str, str]] = {}

    def throttles(self) -> ReplicationThrottles:
        return ReplicationThrottles(
            1, self.topics.get, lambda: self.brokers, num_samples=2, window_ms=1000, clock_ms=lambda: self.now
        )

    def set_rates(self, leader: int, follower: int) -> None:
        self.brokers = {"1": {"leader.replication.throttled.rate": str(leader),
                              "follower.replication.throttled.rate": str(follower)}}  # fmt: skip


def test_nothing_is_throttled_without_a_rate() -> None:
    world = World()
    throttles = world.throttles()
    assert not throttles.leader_throttled("t", 0)
    throttles.leader.record(10**9)
    assert not throttles.leader_holds_back("t", 0, follower_in_sync=False)


def test_the_leader_holds_back_an_out_of_sync_follower_of_a_listed_partition_over_the_rate() -> None:
    world = World()
    throttles = world.throttles()
    world.set_rates(1000, 1000)
    assert throttles.leader_throttled("t", 0)
    assert not throttles.leader_throttled("t", 1)
    assert not throttles.leader_holds_back("t", 0, follower_in_sync=False)  # nothing measured yet
    throttles.leader.record(1500)  # 1500 B over the 1 s minimum window: 1500 B/s
    assert throttles.leader_holds_back("t", 0, follower_in_sync=False)
    assert not throttles.leader_holds_back("t", 0, follower_in_sync=True)  # the ISR is never held back
    assert not throttles.leader_holds_back("t", 1, follower_in_sync=False)  # not listed for the leader
    world.now += 2000  # both windows expired
    assert not throttles.leader_holds_back("t", 0, follower_in_sync=False)


def test_the_follower_waits_until_its_rate_is_back_at_the_bound() -> None:
    world = World()
    throttles = world.throttles()
    world.set_rates(UNLIMITED, 1000)
    assert throttles.follower_throttled("t", 1)
    assert not throttles.follower_throttled("t", 0)
    throttles.follower.record(2000)
    assert throttles.follower_holds_back("t", 1, in_sync=False)
    assert throttles.follower.delay_ms() == 1000  # (2000 - 1000) / 1000 x the 1 s window
    world.set_rates(UNLIMITED, UNLIMITED)  # a new image without the rate: no throttle at once
    assert not throttles.follower_holds_back("t", 1, in_sync=False)


@pytest.mark.parametrize("listed", ["*", "1:1,0:1"])
def test_a_wildcard_or_full_list_throttles_every_partition(listed: str) -> None:
    world = World()
    world.topics["t"]["follower.replication.throttled.replicas"] = listed
    world.set_rates(UNLIMITED, 10)
    throttles = world.throttles()
    assert throttles.follower_throttled("t", 0)
    assert throttles.follower_throttled("t", 1)
