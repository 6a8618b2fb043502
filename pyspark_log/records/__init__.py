"""RecordBatch v2: layout, varints, CRC-32C, compression codecs, control records.

Modules (each opens with the byte layout it implements; Kafka documentation §5.3 "Message Format" is the contract):

``header``          the 61-byte batch header fast path used by the broker (read, check CRC, walk
                    batches, rewrite baseOffset / partitionLeaderEpoch / LogAppendTime)
``varint``          zig-zag varints and the unsigned varints of flexible message encodings
``record``          one record's layout; ``read_records`` is the consumer's per-record hot loop
``batch``           ``encode_batch`` (producers, broker) and ``decode_records`` / ``decode_batches``
``compression``     gzip, snappy (xerial and raw), lz4 (Kafka's frames), zstd; bounded inflation
``control``         transaction markers and KRaft control records, control batches
``columnar``        fetch response records -> column lists or a pyarrow RecordBatch (Spark path)
``columnar_numpy``  the vectorised kernels behind ``columnar.decode_arrow``
``fetched``         what both decoders share: the planned segments, the Arrow schema of records
``errors``          CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError

Importing this package does not import pyarrow or numpy; ``columnar.decode_arrow`` does.
"""
