"""The Kafka wire protocol: declared schemas, derived codecs, api keys, error codes, headers."""
