"""The records of each KIP-848 consumer group and KIP-932 share group as last appended to
``__consumer_offsets``, and the one way both coordinators write a group's change.

A group's state is a set of keyed records (the group, member and assignment records KIP-848 and
KIP-932 define); the topic is compacted, so a change is written as the records whose value
changed plus a tombstone for every record that is gone. ``write`` appends that difference
through the group manager before the member hears back (persist before reply,
docs/architecture.md) and remembers what it wrote; a failed append changes nothing here, so the
next change writes it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from broker.coordinator.group.store import StoreError

log = logging.getLogger(__name__)

Entries = list[tuple[bytes, bytes | None]]


class WrittenRecords:
    """Per group id, its records (key -> value) as last written. ``append(group_id, entries)`` is
    the group manager's append (raises ``StoreError``); ``kind`` names the groups in logs."""

    def __init__(self, append: Callable[[str, Entries], object], kind: str) -> None:
        self._append = append
        self._kind = kind
        self._by_group: dict[str, dict[bytes, bytes]] = {}

    def write(
        self, group_id: str, current: Mapping[bytes, bytes], extra: Iterable[tuple[bytes, bytes | None]] = ()
    ) -> int | None:
        """Append ``extra`` first, then what differs between ``current`` and what was last
        written (changed values, tombstones for keys that are gone); None, or the error code of a
        failed append (nothing is remembered then)."""
        written = self._by_group.get(group_id, {})
        entries: Entries = list(extra)
        entries += [(k, v) for k, v in current.items() if written.get(k) != v]
        entries += [(k, None) for k in written if k not in current]
        if not entries:
            return None
        try:
            self._append(group_id, entries)
        except StoreError as exc:
            log.warning("writing %s %s failed: %s", self._kind, group_id, exc)
            return exc.code
        self._by_group[group_id] = dict(current)
        return None

    def remember(self, group_id: str, current: Mapping[bytes, bytes]) -> None:
        """``current`` is what the log holds for ``group_id`` (a loaded partition's replay)."""
        self._by_group[group_id] = dict(current)

    def keys(self, group_id: str) -> set[bytes]:
        """The keys last written for ``group_id`` (those a conversion must tombstone)."""
        return set(self._by_group.get(group_id, {}))

    def forget(self, group_id: str) -> None:
        """``group_id`` is no longer this coordinator's (deleted, converted or unloaded)."""
        self._by_group.pop(group_id, None)
