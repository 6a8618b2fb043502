"""Producer id allocation (Kafka documentation §4.6 "Message Delivery Semantics": the broker gives each
producer an id; KIP-98).

Every producer id is unique in the cluster and never reused, also across restarts:

* the high bits are the broker's ``node.id``: ``producer_id = node_id << 32 | n`` (node ids are
  int32 and non-negative, so ids stay positive int64s and two brokers never hand out the same one);
* ``n`` is handed out in blocks of ``BLOCK_SIZE``: before the first id of a block is used, the
  block's end is written (atomically, fsynced) to ``producer_id_block`` in the first log dir, so a
  restarted broker continues after the last reserved block. A crash wastes at most one block.

Kafka asks its controller for blocks (AllocateProducerIds, KIP-730); pylog's brokers reserve their
own, which needs no controller round trip (docs/compatibility.md).
"""

from __future__ import annotations

import logging
from pathlib import Path

from broker.log.files import write_atomic

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000
FILE_NAME = "producer_id_block"
NODE_SHIFT = 32
PER_NODE_LIMIT = 1 << NODE_SHIFT


class ProducerIdsExhaustedError(RuntimeError):
    """This broker has handed out all 2**32 ids of its node id."""


class ProducerIdManager:
    """Hands out producer ids of one broker; ``generate`` persists a block before using it."""

    def __init__(self, node_id: int, directory: Path | str) -> None:
        if node_id < 0:
            raise ValueError(f"node id {node_id} cannot own producer ids")
        self.node_id = node_id
        self._path = Path(directory) / FILE_NAME
        self._next = self._read_reserved()
        self._block_end = self._next  # nothing of a new block is reserved yet

    def _read_reserved(self) -> int:
        try:
            text = self._path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        try:
            value = int(text)
        except ValueError as exc:
            raise ValueError(f"{self._path}: not a producer id block end: {text!r}") from exc
        if not 0 <= value <= PER_NODE_LIMIT:
            raise ValueError(f"{self._path}: block end {value} out of range")
        return value

    def generate(self) -> int:
        """The next producer id; raises ProducerIdsExhaustedError or OSError (block not persisted)."""
        if self._next >= self._block_end:
            end = min(self._next + BLOCK_SIZE, PER_NODE_LIMIT)
            if end <= self._next:
                raise ProducerIdsExhaustedError(f"node {self.node_id} has no producer ids left")
            write_atomic(self._path, f"{end}\n".encode("ascii"))
            self._block_end = end
            log.debug("reserved producer ids %d-%d of node %d", self._next, end - 1, self.node_id)
        n = self._next
        self._next += 1
        return (self.node_id << NODE_SHIFT) | n
