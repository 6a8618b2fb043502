"""The replication simulation's settings, constants and failure type (see ``model``)."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

CLUSTER_ID = "sim-replication-01"
TOPIC = "sim"
TOPIC_ID = uuid.UUID(int=0x5111)
CONTROLLER = -1
PRODUCER = -2
MAX_EVENTS = 300_000
RESET_NOTICE_PROBABILITY = 0.75  # a lost message usually shows as a broken connection


class SimulationFailure(AssertionError):
    pass


# -- configuration ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SimConfig:
    brokers: int = 3
    partitions: int = 1
    replication_factor: int = 3
    min_insync_replicas: int = 2
    lag_time_max_ms: int = 600  # replica.lag.time.max.ms
    fetch_wait_max_ms: int = 50  # replica.fetch.wait.max.ms
    fetch_backoff_ms: int = 50  # replica.fetch.backoff.ms
    fetch_max_records: int = 8  # replica.fetch.max.bytes, in records
    socket_timeout_ms: int = 400  # replica.socket.timeout.ms (+ fetch wait: the fetch request timeout)
    session_timeout_ms: int = 1200  # broker.session.timeout.ms
    heartbeat_interval_ms: int = 200  # broker.heartbeat.interval.ms
    request_timeout_ms: int = 800  # the controller channel's request timeout
    retry_backoff_ms: int = 50
    produce_timeout_ms: int = 1500  # the produce request's timeout (acks=all waits at most this)
    hw_checkpoint_interval_ms: int = 300  # replica.high.watermark.checkpoint.interval.ms
    flush_interval_ms: int = 200  # how often a broker fsyncs its logs
    metadata_poll_ms: int = 100  # a broker's metadata fetch cadence (besides pushes)
    min_delay_ms: int = 1
    max_delay_ms: int = 10
    drop_probability: float = 0.0
    duplicate_probability: float = 0.0  # of a registration or heartbeat (delivered again, later)
    produce_interval_ms: tuple[int, int] = (5, 30)
    acks_all_probability: float = 0.7

    @classmethod
    def random(cls, rng: random.Random, *, brokers: tuple[int, int] = (3, 3), lossy: bool = True) -> SimConfig:
        num = rng.randint(*brokers)
        rf = min(num, rng.choice((num, 3)))
        return cls(
            brokers=num,
            partitions=rng.randint(1, 3),
            replication_factor=rf,
            min_insync_replicas=rng.randint(1, min(2, rf)),
            lag_time_max_ms=rng.choice((300, 600, 1000)),
            fetch_wait_max_ms=rng.choice((20, 50, 100)),
            fetch_backoff_ms=rng.choice((20, 50, 100)),
            fetch_max_records=rng.choice((4, 16, 64)),
            session_timeout_ms=rng.choice((900, 1200, 2000)),
            heartbeat_interval_ms=rng.choice((100, 200)),
            request_timeout_ms=rng.choice((300, 800, 1500)),
            produce_timeout_ms=rng.choice((500, 1500)),
            hw_checkpoint_interval_ms=rng.choice((100, 300, 1000)),
            flush_interval_ms=rng.choice((50, 200, 1000)),
            max_delay_ms=rng.choice((2, 5, 10, 25)),
            drop_probability=rng.choice((0.0, 0.0, 0.01, 0.03)) if lossy else 0.0,
            duplicate_probability=rng.choice((0.0, 0.05, 0.2)) if lossy else 0.0,
            produce_interval_ms=rng.choice(((2, 10), (5, 30), (20, 80))),
            acks_all_probability=rng.choice((0.5, 0.8, 1.0)),
        )
