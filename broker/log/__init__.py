"""Segment logs: segments, indexes, log, log manager, recovery, retention."""
