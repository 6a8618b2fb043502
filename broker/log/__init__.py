"""Kafka's on-disk log (Kafka documentation §5.4 "Log"; Kafka documentation §4.2 "Persistence"-4.3): segments,
indexes, log, log manager.

Entry points for the rest of the broker:

* ``manager.LogManager`` — owns ``log.dirs``: ``startup()``, ``get_or_create_log``, ``get_log``,
  ``delete_log``, the ``run_*_once`` background coroutines, ``write_checkpoints``, ``shutdown()``;
* ``log.Log`` — one partition: ``append`` / ``append_as_follower`` → ``LogAppendInfo``,
  ``append_control_marker`` (transaction markers), ``read`` → ``file_slice.FileSlice``
  (sendfile-ready), ``first_unstable_offset`` (read_committed), ``fetch_offset_by_timestamp``,
  ``truncate_to``, ``truncate_fully_and_start_at``, ``delete_records_before``, ``flush``
  (blocking; rolls and ``flush.*`` flush in the background). Its collaborators:
  ``log.segments`` (``segments.LogSegments``: the segments by offset, the active one,
  ``collect_aborted_transactions`` for read_committed), ``log.producer_state``
  (``producer_state.ProducerStateManager``) and ``log.flusher`` (``flush.LogFlusher``: the
  recovery point, ``wait_durable``, ``flush_async``, ``sync_before``, ``flush_if_due``);
* ``config.LogConfig`` / ``config.LogManagerConfig`` — Kafka's config names and defaults;
* ``errors`` — ``LogError`` subclasses carrying Kafka error codes;
* ``validate.validate_and_assign_offsets`` — the pure produce validation.

Module map: validate (pure), producer_state (idempotence and transactions per partition, its
snapshot files, its rebuild from the log), segment (owns the files of a segment), segments (a
log's ordered segments), offset_index / time_index / txn_index / index_file (index layouts), scan
(batch walks), log, recovery (start-up), retention (pure policy), checkpoint, files, flush (a
log's recovery point and flushes), flush_job (the fsyncs of one flush, in a worker thread),
dir_lock, manager.
"""
