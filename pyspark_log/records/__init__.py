"""RecordBatch v2: layout, varints, CRC-32C, compression codecs, control records."""
