"""``pylog produce TOPIC``: one record per line of stdin or ``--file`` (Kafka's
``kafka-console-producer``).

A line's trailing ``\\n`` (and ``\\r\\n``) is dropped; an empty line is an empty value, as in
Kafka's tool. With ``--key-separator SEP`` the text before the first SEP is the key and a line
without SEP is an error (Kafka: "No key separator found on line number N"). ``--header k=v``
headers go on every record. Reading a file draws a rich progress bar on stderr (when stderr is a
terminal), by bytes read; a summary line (records, bytes, rate) ends every run on stderr. The
first failed delivery stops reading; what was already sent is flushed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import threading
import time
from typing import IO, Any

from pyspark_log.cli.context import CLOSE_TIMEOUT_MS, Context
from pyspark_log.cli.errors import CliError, UsageError, kafka_error
from pyspark_log.cli.parsing import format_bytes, non_negative_int, parse_headers, unescape_separator
from pyspark_log.cli.progress import progress_bar
from pyspark_log.client import KafkaError, RecordMetadata

COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
_PROGRESS_STEP_BYTES = 64 * 1024


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser("produce", help="produce one record per line of stdin or a file", parents=[common])
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--file", metavar="PATH", help="read lines from PATH instead of stdin")
    p.add_argument("--key-separator", metavar="SEP", help="text before the first SEP is the key (\\t allowed)")
    p.add_argument("--header", action="append", metavar="K=V", help="a header on every record (repeatable)")
    p.add_argument("--partition", type=non_negative_int, metavar="N", help="send every record to partition N")
    p.add_argument("--acks", choices=("0", "1", "all", "-1"), help="acks (default all)")
    p.add_argument("--compression", choices=COMPRESSION, help="compression.type (default none)")
    p.add_argument("--linger-ms", type=non_negative_int, metavar="N", help="linger.ms (default 5)")
    p.set_defaults(handler=produce)


class _Deliveries:
    """Counts acknowledgements and keeps the first failure (callbacks run on the I/O thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.acked = 0
        self.failed = 0
        self.error: BaseException | None = None

    def __call__(self, meta: RecordMetadata | None, exc: BaseException | None) -> None:
        with self._lock:
            if exc is None:
                self.acked += 1
                return
            self.failed += 1
            if self.error is None:
                self.error = exc


def _open_source(path: str | None) -> tuple[IO[bytes], int | None]:
    """The byte stream to read and its size when known (a regular file)."""
    if path is None:
        return sys.stdin.buffer, None
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed by the caller
    except OSError as exc:
        raise UsageError(f"cannot open {path!r}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(stream.fileno())
    except OSError:
        return stream, None
    return stream, st.st_size if stat.S_ISREG(st.st_mode) else None


def _split_line(raw: bytes, separator: bytes | None, number: int) -> tuple[bytes | None, bytes]:
    line = raw[:-1] if raw.endswith(b"\n") else raw
    if line.endswith(b"\r"):
        line = line[:-1]
    if separator is None:
        return None, line
    key, found, value = line.partition(separator)
    if not found:
        raise CliError(f"no key separator {separator.decode('utf-8', 'replace')!r} on line {number}")
    return key, value


def produce(args: argparse.Namespace, ctx: Context) -> int:
    topic: str = args.topic
    separator = None if args.key_separator is None else unescape_separator(args.key_separator).encode("utf-8")
    headers = parse_headers(args.header)
    source, total_bytes = _open_source(args.file)
    overrides = {"acks": args.acks, "compression.type": args.compression, "linger.ms": args.linger_ms}
    deliveries = _Deliveries()
    sent = payload_bytes = 0
    started = time.monotonic()
    try:
        producer = ctx.producer(overrides)
        clean = False
        try:
            try:
                partitions = producer.partitions_for(topic)
            except KafkaError as exc:
                raise kafka_error(exc, topic) from None
            if args.partition is not None and args.partition not in partitions:
                raise CliError(f"topic {topic!r} has no partition {args.partition} (it has {len(partitions)})")
            with progress_bar(topic, total_bytes, unit="bytes") as bar:
                pending = 0
                for number, raw in enumerate(source, 1):
                    if deliveries.error is not None:
                        break
                    key, value = _split_line(raw, separator, number)
                    producer.send(
                        topic, value, key=key, headers=headers, partition=args.partition, on_delivery=deliveries
                    )
                    sent += 1
                    payload_bytes += len(value) + (0 if key is None else len(key))
                    pending += len(raw)
                    if pending >= _PROGRESS_STEP_BYTES:
                        bar.advance(pending)
                        pending = 0
                bar.advance(pending)
            producer.flush()
            clean = True
        except KafkaError as exc:
            raise kafka_error(exc, topic) from None
        finally:
            with contextlib.suppress(Exception):
                producer.close(None if clean else CLOSE_TIMEOUT_MS)
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    elapsed = max(time.monotonic() - started, 1e-6)
    if deliveries.error is not None:
        err = deliveries.error
        detail = str(kafka_error(err, topic)) if isinstance(err, KafkaError) else str(err)
        raise CliError(f"{deliveries.failed} of {sent} records failed: {detail}")
    print(
        f"Produced {sent} record{'s' if sent != 1 else ''} ({format_bytes(payload_bytes)}) to {topic} "
        f"in {elapsed:.2f} s ({sent / elapsed:,.0f} records/s, {format_bytes(payload_bytes / elapsed)}/s)",
        file=sys.stderr,
    )
    return 0
