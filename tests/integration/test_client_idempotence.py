"""pylog's idempotent producer against a real broker: connections broken while Produce requests
are in flight make the producer retry, and the broker's producer state drops the duplicates
(Kafka documentation §3.3 "Producer Configs", `enable.idempotence`: a retried message B is acknowledged, not
stored twice)."""

from __future__ import annotations

import threading
import time

from pyspark_log.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from pyspark_log.embedded import EmbeddedBroker
from tests.waiting import Deadline

PARTITIONS = 3
PER_PARTITION = 3000
CHUNK = 300  # records per partition sent between two forced breaks


def _break_connections(producer: Producer) -> int:
    """Close every broker connection of ``producer`` on its own loop (in-flight requests fail)."""
    core = producer.core
    conns = list(core.cluster._conns.values())
    for conn in conns:
        conn.close()
    return len(conns)


def test_broken_connections_during_produce_leave_no_duplicates_and_no_gaps(
    broker: EmbeddedBroker, topic_name: str
) -> None:
    bs = broker.bootstrap_servers
    with AdminClient({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(topic_name, PARTITIONS, 1)])
    stop = threading.Event()
    breaks = 0
    config = {"bootstrap.servers": bs, "linger.ms": 2, "batch.size": 2048, "retry.backoff.ms": 5}
    with Producer(config) as p:
        assert p.core.idempotent

        def breaker() -> None:
            nonlocal breaks
            while not stop.is_set():
                time.sleep(0.02)
                breaks += p._run(_async(lambda: _break_connections(p)))

        thread = threading.Thread(target=breaker, daemon=True)
        thread.start()
        futures = []
        for start in range(0, PER_PARTITION, CHUNK):
            futures += [
                p.send(topic_name, b"%d-%06d" % (part, i) + b"." * 100, partition=part)
                for i in range(start, start + CHUNK)
                for part in range(PARTITIONS)
            ]
            # besides the breaker's random ones, one break right after each chunk's sends, while
            # its requests are queued or in flight; polled, so a chunk waits for a connection to exist
            deadline = Deadline(60)
            while (closed := p._run(_async(lambda: _break_connections(p)))) == 0 and not deadline.expired():
                time.sleep(0.005)
            breaks += closed
        p.flush()
        stop.set()
        thread.join()
        metas = [f.result() for f in futures]
    assert breaks > 0
    with Consumer({"bootstrap.servers": bs, "auto.offset.reset": "earliest"}) as c:
        tps = [TopicPartition(topic_name, part) for part in range(PARTITIONS)]
        c.assign(tps)
        got: dict[int, list[bytes]] = {part: [] for part in range(PARTITIONS)}
        deadline = Deadline(60)
        while sum(map(len, got.values())) < PARTITIONS * PER_PARTITION and not deadline.expired():
            for r in c.poll(timeout_ms=500):
                assert r.value is not None
                got[r.partition].append(r.value)
        ends = c.end_offsets(tps)
    for part in range(PARTITIONS):
        want = [b"%d-%06d" % (part, i) + b"." * 100 for i in range(PER_PARTITION)]
        assert got[part] == want, f"partition {part}: duplicates or reordering"
        assert ends[TopicPartition(topic_name, part)] == PER_PARTITION
        offsets = [m.offset for m in metas if m.partition == part]
        assert offsets == list(range(PER_PARTITION))


async def _async(fn):  # type: ignore[no-untyped-def]
    return fn()
