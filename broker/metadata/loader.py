"""``MetadataLoader``: this node's applied metadata — the ``ClusterState`` of every committed entry
delivered so far and the ``MetadataImage`` derived from it — and the listeners it is published to.

As Kafka's ``org.apache.kafka.image.loader.MetadataLoader``: it loads a KIP-630 snapshot at
start-up (``load_snapshot``), then replays the committed entries of the metadata log in log
order, a batch at a time (``apply_batch``, with ``broker.metadata.replay``), and after each batch
hands the old and the new image to every listener (Kafka's ``MetadataPublisher``), in the order
they were added. A listener that raises is logged and the others still run. ``capture_snapshot`` freezes the current
state for the Raft driver's snapshot writer (the records are encoded later, off the event loop).

Pure: no clock, file, socket or event loop; the driver (``broker.controller.quorum``) calls it
from the Raft driver's committed-entry and snapshot callbacks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from broker.metadata.cluster_state import ClusterState, build_image
from broker.metadata.image import MetadataImage
from broker.metadata.replay import apply_payloads
from broker.metadata.snapshot_records import state_from_records, state_to_records

log = logging.getLogger(__name__)

ImageListener = Callable[[MetadataImage, MetadataImage], None]  # (old image, new image)


class MetadataLoader:
    """The applied ``ClusterState`` and its image on one node; see the module docstring.

    ``cluster_id``: this node's (from ``meta.properties``), the image's until the log names one;
    ``local_broker_id``: this node's id when it has the broker role (``build_image``)."""

    def __init__(self, *, cluster_id: str, local_broker_id: int | None) -> None:
        self._cluster_id = cluster_id
        self._local_broker_id = local_broker_id
        self._state = ClusterState()
        self._image = self._build()
        self._listeners: list[ImageListener] = []

    @property
    def state(self) -> ClusterState:
        return self._state

    @property
    def image(self) -> MetadataImage:
        return self._image

    def add_listener(self, listener: ImageListener) -> None:
        self._listeners.append(listener)

    def apply_committed(self, offset: int, payload: bytes) -> None:
        """One committed entry at ``offset``: a batch of one (``apply_batch``)."""
        self.apply_batch(((offset, payload),))

    def apply_batch(self, entries: Sequence[tuple[int, bytes]]) -> None:
        """A batch of committed entries ``(offset, payload)`` in log order: replayed into one
        mutable state (``apply_payloads``, Kafka's ``MetadataDelta``), then one new image
        published (Kafka's loader publishes once per batch, and at start-up not before it caught
        up). The listeners compare the image before and after the batch, so they see its net
        change: each derives what it does from that difference (logs to open or delete,
        leaderships, configs, coordinator partitions), never from the entries in between."""
        if not entries:
            return
        before = self._state.cluster_id
        self._state = apply_payloads(self._state, entries)
        offset = entries[-1][0]
        if before is None and self._state.cluster_id not in (None, self._cluster_id):
            log.error(
                "the metadata log belongs to cluster %s, but this node's cluster id is %s",
                self._state.cluster_id,
                self._cluster_id,
            )
        self._publish(offset)

    def capture_snapshot(self) -> Callable[[], list[bytes]]:
        """KIP-630: the state as of every delivered entry, frozen now (``ClusterState`` is
        immutable), encoded when the returned function is called (``snapshot_records``)."""
        state = self._state
        return lambda: state_to_records(state)

    def load_snapshot(self, end_offset: int, records: Sequence[bytes]) -> None:
        """KIP-630 start-up: the state is the snapshot's; the log tail is applied after it."""
        self._state = state_from_records(tuple(records))
        self._publish(end_offset - 1)

    def _build(self) -> MetadataImage:
        return build_image(self._state, cluster_id=self._cluster_id, local_broker_id=self._local_broker_id)

    def _publish(self, offset: int) -> None:
        new = self._build()
        old, self._image = self._image, new
        for listener in self._listeners:
            try:
                listener(old, new)
            except Exception:
                log.exception("metadata listener failed at offset %d", offset)
