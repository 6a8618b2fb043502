"""asyncio listener, framing, per-connection ordering, sendfile."""
