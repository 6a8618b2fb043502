"""A transaction left open by a dead producer: a confluent-kafka transactional producer in its
own process begins a transaction, writes ``count`` records to partition 0, flushes, and is
SIGKILLed (the issue's "dead Spark driver"). Its transaction stays open on the partition until
the coordinator aborts it at ``transaction.timeout.ms`` (``TXN_TIMEOUT_MS``, 10 minutes)."""

from __future__ import annotations

import signal
import subprocess
import sys

TXN_TIMEOUT_MS = 600_000

CHILD = f"""
import sys, time
from confluent_kafka import Producer
bootstrap, topic, txn_id, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
p = Producer({{"bootstrap.servers": bootstrap, "transactional.id": txn_id,
              "transaction.timeout.ms": {TXN_TIMEOUT_MS}, "linger.ms": 0}})
p.init_transactions(30)
p.begin_transaction()
for i in range(count):
    p.produce(topic, value=f"open-{{i}}".encode(), partition=0)
assert p.flush(30) == 0
print("IN-TRANSACTION", flush=True)
time.sleep(3600)
"""


def leave_open_transaction(bootstrap: str, topic: str, transactional_id: str, count: int) -> None:
    """Run the producer until its records are written, then SIGKILL it (always reaped)."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, bootstrap, topic, transactional_id, str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line == "IN-TRANSACTION", f"the producer child did not start its transaction ({line!r})"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        if child.stdout is not None:
            child.stdout.close()
