"""The Kafka wire protocol: declared schemas, generated codecs, api keys, error codes, headers.

Modules: ``types`` (primitives), ``message`` (the decoded value type), ``schema`` / ``dsl``
(the declaration model and our compact text form), ``codegen`` (per-version codecs),
``schemas/`` (the declarations, one module per API family), ``registry`` (``get_api``),
``headers`` (request/response headers and frames), ``api_keys``, ``errors``, ``versions``
(the advertised ranges: Kafka 3.7).

A broker handler::

    header, req = decode_request(frame)
    reply = encode_response(header.api_key, header.api_version, header.correlation_id, {...})

A client::

    frame = encode_request(ApiKey.METADATA, 12, correlation_id, "my-client", {"topics": None})
    correlation_id, resp = decode_response(ApiKey.METADATA, 12, reply_frame)
"""

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.errors import DecodeError, EncodeError, ErrorCode, KafkaError, UnsupportedVersionError
from pyspark_log.wire.headers import (
    RequestHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_api_versions_fallback,
    encode_request,
    encode_request_parts,
    encode_response,
    encode_response_parts,
    frame_chunks,
    peek_correlation_id,
)
from pyspark_log.wire.message import Message
from pyspark_log.wire.registry import (
    all_apis,
    compile_all,
    decode_request_body,
    decode_response_body,
    encode_request_body,
    encode_response_body,
    get_api,
)
from pyspark_log.wire.schema import Api, Schema
from pyspark_log.wire.versions import KAFKA_RELEASE, SUPPORTED_VERSIONS

__all__ = [
    "KAFKA_RELEASE",
    "SUPPORTED_VERSIONS",
    "Api",
    "ApiKey",
    "DecodeError",
    "EncodeError",
    "ErrorCode",
    "KafkaError",
    "Message",
    "RequestHeader",
    "Schema",
    "UnsupportedVersionError",
    "all_apis",
    "compile_all",
    "decode_request",
    "decode_request_body",
    "decode_request_header",
    "decode_response",
    "decode_response_body",
    "encode_api_versions_fallback",
    "encode_request",
    "encode_request_body",
    "encode_request_parts",
    "encode_response",
    "encode_response_body",
    "encode_response_parts",
    "frame_chunks",
    "get_api",
    "peek_correlation_id",
]
