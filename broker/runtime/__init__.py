"""The broker process's Python runtime: garbage-collection pauses (``gc_pauses``), the start-up
heap frozen out of full collections (``gc_freeze``), its free pages returned to the OS
(``heap_trim``) and their metrics (``metrics``)."""
