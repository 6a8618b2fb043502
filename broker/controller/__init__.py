"""The metadata controllers: the decisions that turn admin and broker requests into metadata
records (pure), and the quorum and single-node controllers that run them. The metadata model they
write and everyone reads is ``broker.metadata``."""
