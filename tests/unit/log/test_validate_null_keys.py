"""Records without a key are refused on a compacted topic (KIP-467; Kafka ``LogValidator.validateKey``).

Kafka documentation §4.8 "Log Compaction": compaction keeps at least the last known value of every message key
in a partition — compaction works per key, so a keyless record has no
place in a compacted log: INVALID_RECORD, each such record named in ``record_errors``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.config import LogConfig
from broker.log.errors import InvalidRecordError
from broker.log.validate import NULL_KEY_MESSAGE, AppendOrigin, validate_and_assign_offsets
from pyspark_log.records import compression
from pyspark_log.records.batch import ProducerRecord, encode_batch
from tests.unit.log.helpers import T0_MS, FakeClock, make_log

COMPACTED = LogConfig(cleanup_policy=("compact",))


def records(*keys: bytes | None, codec: int = compression.NONE) -> bytes:
    return encode_batch([ProducerRecord(k, b"v", T0_MS) for k in keys], codec=codec)


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP])
def test_section_4_8_null_keys_refused_on_a_compacted_topic(codec: int) -> None:
    with pytest.raises(InvalidRecordError) as raised:
        validate_and_assign_offsets(records(b"a", None, b"c", None, codec=codec), 0, COMPACTED, T0_MS)
    assert raised.value.code == 87
    assert raised.value.record_errors == ((1, NULL_KEY_MESSAGE), (3, NULL_KEY_MESSAGE))
    assert NULL_KEY_MESSAGE in str(raised.value)


def test_keyed_records_pass_and_delete_policy_topics_take_null_keys() -> None:
    assert validate_and_assign_offsets(records(b"a", b"b"), 0, COMPACTED, T0_MS).records_count == 2
    assert validate_and_assign_offsets(records(None), 0, LogConfig(), T0_MS).records_count == 1
    both = LogConfig(cleanup_policy=("compact", "delete"))
    with pytest.raises(InvalidRecordError):
        validate_and_assign_offsets(records(None), 0, both, T0_MS)


def test_the_broker_own_writes_are_not_checked() -> None:
    result = validate_and_assign_offsets(records(None), 0, COMPACTED, T0_MS, origin=AppendOrigin.COORDINATOR)
    assert result.records_count == 1


def test_log_append_refuses_and_writes_nothing(tmp_path: Path) -> None:
    log = make_log(tmp_path, FakeClock(), cleanup_policy=("compact",))
    with pytest.raises(InvalidRecordError):
        log.append(records(b"a", None))
    assert log.log_end_offset == 0
