"""The log cleaner: log compaction of ``cleanup.policy=compact`` topics (seed 000 §4.8).

Seed 000 §4.8 "Log Compaction Details": "로그 컴팩션은 로그 클리너가 처리한다. 로그 클리너는 로그
세그먼트 파일을 재복사하는 백그라운드 스레드 풀로, 키가 로그 헤드에 있는 레코드를 제거한다."

Modules, pure decisions apart from I/O (DESIGN principles 1 and 6):

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
