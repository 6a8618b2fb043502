"""The log cleaner: log compaction of ``cleanup.policy=compact`` topics (Kafka documentation §4.8 "Log Compaction").

Kafka documentation §4.8 "Log Compaction" "Log Compaction Details": a pool of background cleaner threads
recopies segment files and drops records whose key appears again in the log head.

Modules, pure decisions apart from I/O (docs/architecture.md, "pure decisions, I/O at the edges"):

* ``config``      broker-level ``log.cleaner.*`` settings (``CleanerConfig``);
* ``offset_map``  the dense key-hash → offset table of the dirty head, 24 bytes per entry;
* ``choose``      which log to clean and over which offsets (pure);
* ``retain``      which batches and records a clean keeps (pure);
* ``rewrite``     re-encoding a batch with some of its records (pure codec);
* ``recopy``      the worker's part: build the map, write ``.cleaned`` segment files and indexes;
* ``worker``      the worker processes that run ``recopy`` off the broker's interpreter (GIL);
* ``swap``        ``.cleaned`` → ``.swap`` → live, on the event loop; completing a swap at start-up;
* ``cleaner``     ``LogCleaner``: the background task, its workers, checkpoint, metrics.
"""
