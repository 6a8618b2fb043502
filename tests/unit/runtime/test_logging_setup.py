"""The broker's application logs (``broker.logging_setup``): text and json formats with
structured fields, Kafka's named loggers and their files, rotation at the size limit, and the
run-time level changes of KIP-412 (``BROKER_LOGGER``); the start-up recovery progress lines
(``broker.log.recovery_progress``) rate-limited by an injected monotonic clock."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker import logging_setup
from broker.log.recovery_progress import RecoveryProgress
from broker.logging_setup import (
    REQUEST_LOGGER,
    STATE_CHANGE_LOGGER,
    JsonFormatter,
    LoggerLevelError,
    TextFormatter,
    check_level_change,
    configure,
    describe_loggers,
    reset_logger_level,
    set_logger_level,
)


def _record(msg: str = "hello %s", args: tuple[object, ...] = ("world",), **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("broker.test", logging.WARNING, __file__, 1, msg, args, None)
    record.created = 1_700_000_000.123456  # 2023-11-14T22:13:20.123Z
    for key, value in extra.items():
        setattr(record, key, value)
    return record


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """configure() replaces the process's root handlers and levels: put them back."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    named = {n: (logging.getLogger(n).level, logging.getLogger(n).propagate, list(logging.getLogger(n).handlers))
             for n in (REQUEST_LOGGER, STATE_CHANGE_LOGGER)}  # fmt: skip
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])
    for name, (level, propagate, handlers) in named.items():
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
        for handler in handlers:
            logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def test_text_format_appends_fields_as_key_value_pairs() -> None:
    line = TextFormatter().format(_record(fields={"topic": "t", "partition": 3, "note": "two words"}))
    assert line.endswith(' WARNING broker.test: hello world topic=t partition=3 note="two words"')


def test_text_format_without_fields_is_the_plain_line() -> None:
    assert TextFormatter().format(_record()).endswith(" WARNING broker.test: hello world")


def test_json_format_has_the_documented_keys_and_fields() -> None:
    line = JsonFormatter(7).format(_record(fields={"topic": "t", "isr": [1, 2], "level": "not me"}))
    obj = json.loads(line)
    assert obj == {
        "timestamp": "2023-11-14T22:13:20.123Z",
        "level": "WARN",  # log4j's names
        "logger": "broker.test",
        "message": "hello world",
        "node_id": 7,
        "topic": "t",
        "isr": [1, 2],
    }  # a field never replaces a reserved key


def _boom() -> None:
    raise ValueError("boom")


def test_json_format_carries_the_traceback() -> None:
    try:
        _boom()
    except ValueError:
        record = _record(exc_info=sys.exc_info())
    obj = json.loads(JsonFormatter(1).format(record))
    assert "ValueError: boom" in obj["exception"]
    assert "\n" not in JsonFormatter(1).format(record)  # one line per record


def test_level_names_are_log4js() -> None:
    assert logging_setup.level_name(logging_setup.TRACE) == "TRACE"
    assert logging_setup.level_name(logging.CRITICAL) == "FATAL"
    assert logging_setup.python_level("WARN") == logging.WARNING
    with pytest.raises(ValueError, match="not a log level"):
        logging_setup.python_level("LOUD")


@pytest.mark.usefixtures("restore_logging")
def test_files_named_as_kafkas_and_rotated_at_the_size_limit(tmp_path: Path) -> None:
    configure(log_format="json", node_id=3, logs_dir=tmp_path, max_bytes=2000, backup_count=2, stream=io.StringIO())
    state = logging.getLogger(STATE_CHANGE_LOGGER)
    for i in range(40):
        state.info("change %d", i, extra={"fields": {"partition": i}})
    logging.getLogger("broker.x").info("server line")
    logging.getLogger(REQUEST_LOGGER).debug("not at WARN")  # Kafka's default: the request log is off
    for handler in logging.getLogger().handlers + state.handlers:
        handler.flush()
    assert (tmp_path / "state-change.log.1").exists()
    assert (tmp_path / "state-change.log.2").exists()
    assert not (tmp_path / "state-change.log.3").exists()  # backup_count
    assert (tmp_path / "state-change.log").stat().st_size <= 2000
    last = [json.loads(x) for x in (tmp_path / "state-change.log").read_text().splitlines()][-1]
    assert last["message"] == "change 39"
    assert last["partition"] == 39
    assert last["node_id"] == 3
    server = (tmp_path / "server.log").read_text()
    assert "server line" in server
    assert "change " not in server
    assert (tmp_path / "kafka-request.log").read_text() == ""


@pytest.mark.usefixtures("restore_logging")
def test_broker_logger_levels_described_set_and_reset() -> None:
    configure(level="INFO", stream=io.StringIO())
    levels = describe_loggers()
    assert levels["root"] == "INFO"
    assert levels[REQUEST_LOGGER] == "WARN"
    assert levels[STATE_CHANGE_LOGGER] == "INFO"
    set_logger_level(REQUEST_LOGGER, "DEBUG")
    assert logging.getLogger(REQUEST_LOGGER).isEnabledFor(logging.DEBUG)
    assert describe_loggers()[REQUEST_LOGGER] == "DEBUG"
    reset_logger_level(REQUEST_LOGGER)  # back to the root logger's level
    assert describe_loggers()[REQUEST_LOGGER] == "INFO"
    assert not logging.getLogger(REQUEST_LOGGER).isEnabledFor(logging.DEBUG)


def test_refused_level_changes_name_kafkas_errors() -> None:
    with pytest.raises(LoggerLevelError, match="not a supported log level") as bad:
        check_level_change(REQUEST_LOGGER, "LOUD")
    assert bad.value.invalid_config
    with pytest.raises(LoggerLevelError, match="does not exist") as unknown:
        check_level_change("no.such.logger.anywhere", "DEBUG")
    assert unknown.value.invalid_config
    with pytest.raises(LoggerLevelError, match="root logger is not allowed") as root:
        check_level_change("root", None)
    assert not root.value.invalid_config


def _partition_dir(root: Path, name: str, segments: int, size: int) -> Path:
    directory = root / name
    directory.mkdir()
    for i in range(segments):
        (directory / f"{i:020d}.log").write_bytes(b"x" * size)
        (directory / f"{i:020d}.index").write_bytes(b"")
    return directory


def test_recovery_progress_is_rate_limited_by_the_clock(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dirs = [_partition_dir(tmp_path, f"t-{i}", 2, 100) for i in range(6)]
    now = [100.0]
    progress = RecoveryProgress(interval_ms=5000, clock=lambda: now[0])
    progress.measure(dirs)
    assert (progress.partitions_total, progress.segments_total, progress.bytes_total) == (6, 12, 1200)
    caplog.set_level(logging.INFO, logger="broker.log.recovery_progress")
    for directory, step in zip(dirs, (1.0, 1.0, 4.0, 1.0, 6.0, 1.0), strict=True):
        now[0] += step
        progress.partition_done(directory)
    lines = [r.getMessage() for r in caplog.records]
    # reports at 6 s (3 done) and 13 s (5 done); none per partition, none at the last one
    assert lines == [
        "log recovery: 3/6 partitions, 6/12 segments, 600 B/1.2 KB (50%), ETA 6 s",
        "log recovery: 5/6 partitions, 10/12 segments, 1000 B/1.2 KB (83%), ETA 3 s",
    ]
    assert caplog.records[0].fields["bytes_done"] == 600  # type: ignore[attr-defined]
    progress.finish()
    assert caplog.records[-1].getMessage().startswith("log recovery done: 6 partitions, 12 segments")


def test_recovery_progress_moves_within_one_large_partition(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    big = _partition_dir(tmp_path, "big-0", 5, 1000)
    small = _partition_dir(tmp_path, "small-0", 1, 1000)
    now = [0.0]
    progress = RecoveryProgress(interval_ms=5000, clock=lambda: now[0])
    progress.measure([big, small])
    caplog.set_level(logging.INFO, logger="broker.log.recovery_progress")
    for _ in range(4):  # 4 of the big partition's 5 segments, 3 s each
        now[0] += 3.0
        progress.segment_done(1000)
    assert [r.getMessage() for r in caplog.records] == [
        "log recovery: 0/2 partitions, 2/6 segments, 2.0 KB/5.9 KB (33%), ETA 12 s",  # at 6 s
        "log recovery: 0/2 partitions, 4/6 segments, 3.9 KB/5.9 KB (66%), ETA 6 s",  # at 12 s
    ]
    progress.segment_done(900)  # a segment shorter than measured (its corrupt tail was cut)
    progress.partition_done(big)  # settles to what was measured
    assert (progress.segments_done, progress.bytes_done) == (5, 5000)
