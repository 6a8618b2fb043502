"""The cluster metadata model: what the KIP-595 metadata log says and the image everyone reads.

Laid out as Apache Kafka's ``metadata`` module (``org.apache.kafka.image``), by concern:

==========================  ====================================================================
module                      holds (Kafka's counterpart)
==========================  ====================================================================
``image``                   ``MetadataImage`` and its parts (``TopicImage``, ``PartitionImage``,
                            ``BrokerInfo``): the immutable view request handlers, replication,
                            coordinators and metrics read (Kafka's ``MetadataImage``,
                            ``TopicsImage``, ``ClusterImage``)
``records``                 the metadata record kinds and their encoding as Raft entries (Kafka's
                            ``common/metadata/*.json`` records)
``cluster_state``           ``ClusterState``: everything the log said up to an offset, fenced
                            registrations included, and ``build_image``, the image derived from it
``replay``                  ``apply_payload`` / ``apply_record``: one committed entry moves the
                            state forward (the replay half of Kafka's ``MetadataDelta``)
``snapshot_records``        a state as KIP-630 snapshot records and back (Kafka's
                            ``image.writer.ImageWriter`` and the snapshot side of ``image.loader``)
``loader``                  ``MetadataLoader``: this node's applied state and image; replays each
                            committed entry (or loads a snapshot) and publishes the new image to
                            listeners (Kafka's ``image.loader.MetadataLoader`` and its publishers)
==========================  ====================================================================

Everything here is pure: immutable values and functions, no clock, file, socket or event loop,
and nothing of ``broker.controller``. The controller (``broker.controller``) decides which
records to append; every node replays the committed ones with this package.
"""
