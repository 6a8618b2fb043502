"""The pylog client: connections and metadata, Producer, Consumer, Admin (asyncio core, sync facade)."""
