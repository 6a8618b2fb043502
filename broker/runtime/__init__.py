"""The broker process's Python runtime: garbage-collection pauses (``gc_pauses``), the start-up
heap frozen out of full collections (``gc_freeze``) and their metrics (``metrics``)."""
