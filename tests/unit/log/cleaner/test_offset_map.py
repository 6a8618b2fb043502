"""The offset map (Kafka documentation §4.8 "Log Compaction" "Log Compaction Details", steps 2 and 4).

that summary is a dense hash table with exactly 24 bytes per entry.
"""

from __future__ import annotations

import pytest

from broker.log.cleaner.offset_map import BYTES_PER_ENTRY, OffsetMap, key_digest


def test_section_4_8_exactly_24_bytes_per_entry() -> None:
    """exactly 24 bytes per entry: the table is slots × 24 bytes, nothing else per key."""
    offsets = OffsetMap(24 * 1000, load_factor=0.9)
    assert BYTES_PER_ENTRY == 24
    assert offsets.slots == 1000
    assert offsets.memory_bytes == 24 * 1000
    assert offsets.max_entries == 900
    for i in range(900):
        offsets.put(f"key-{i}".encode(), i)
    assert offsets.memory_bytes / offsets.size == pytest.approx(24 / 0.9)


def test_section_4_8_summary_of_last_offset_per_key() -> None:
    """a compact summary of the last offset of each key in the head: a later put of a key wins."""
    offsets = OffsetMap(24 * 64)
    offsets.put(b"123", 5)
    offsets.put(b"456", 6)
    offsets.put(b"123", 9)
    assert offsets.get(b"123") == 9
    assert offsets.get(b"456") == 6
    assert offsets.get(b"789") == -1
    assert offsets.size == 2
    assert offsets.latest_offset == 9


def test_slot_collisions_are_probed_apart() -> None:
    """Two digests that land on the same slot keep separate entries (open addressing)."""
    offsets = OffsetMap(24 * 8, load_factor=1.0)
    # (hi ^ lo) % 8 == 3 for all of these, with different digests
    digests = [(3, 0), (11, 0), (19, 0), (0, 3)]
    for i, (hi, lo) in enumerate(digests):
        offsets.put_digest(hi, lo, 100 + i)
    for i, (hi, lo) in enumerate(digests):
        assert offsets.get_digest(hi, lo) == 100 + i
    assert offsets.probes > 0
    assert offsets.get_digest(27, 0) == -1  # also slot 3, absent: probing stops at an empty slot


def test_probing_wraps_around_the_end_of_the_table() -> None:
    offsets = OffsetMap(24 * 4, load_factor=1.0)
    for i, hi in enumerate((3, 7, 11)):  # all slot 3: the second and third wrap to 0 and 1
        offsets.put_digest(hi, 0, i)
    assert [offsets.get_digest(hi, 0) for hi in (3, 7, 11)] == [0, 1, 2]


def test_full_map_refuses_a_new_key_but_updates_a_known_one() -> None:
    offsets = OffsetMap(24 * 10, load_factor=0.5)
    for i in range(5):
        offsets.put(bytes([i]), i)
    assert offsets.is_full
    assert offsets.free_entries == 0
    offsets.put(bytes([0]), 50)
    assert offsets.get(bytes([0])) == 50
    with pytest.raises(OverflowError):
        offsets.put(b"new", 51)


def test_clear_empties_the_map_for_the_next_clean() -> None:
    offsets = OffsetMap(24 * 16)
    offsets.put(b"a", 1)
    offsets.clear()
    assert offsets.size == 0
    assert offsets.get(b"a") == -1
    assert offsets.latest_offset == -1


def test_key_digest_is_md5_as_two_signed_longs() -> None:
    hi, lo = key_digest(b"")
    # MD5("") = d41d8cd98f00b204e9800998ecf8427e
    assert hi == int.from_bytes(bytes.fromhex("d41d8cd98f00b204"), "big", signed=True)
    assert lo == int.from_bytes(bytes.fromhex("e9800998ecf8427e"), "big", signed=True)


def test_too_small_a_buffer_is_refused() -> None:
    with pytest.raises(ValueError, match="24 bytes"):
        OffsetMap(23)
