"""KIP-848 ``SubscribedTopicRegex``: RE2 syntax, matched against whole topic names (Kafka 4.1
compiles it with Google's RE2/J and uses ``matcher(topic).matches()``).

With the ``google-re2`` package (a dependency of the broker) the syntax is RE2's, as in Kafka;
without it Python's ``re`` is used, which accepts more (look-arounds, back-references) and
differs in a few escapes (docs/compatibility.md). Internal topics (``__consumer_offsets``,
``__transaction_state``) never match, as in Kafka. Compiled patterns and match results are cached.
"""

from __future__ import annotations

import functools
import re
from typing import Any

try:  # pragma: no cover - which engine is installed
    import re2 as _engine  # type: ignore[import-not-found, import-untyped, unused-ignore]

    ENGINE = "re2"
except ImportError:  # pragma: no cover
    _engine = re
    ENGINE = "re"

_ENGINE_ERROR: type[Exception] = getattr(_engine, "error", re.error)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class RegexError(ValueError):
    """The pattern does not compile (INVALID_REGULAR_EXPRESSION)."""


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> Any:
    try:
        if ENGINE == "re2":
            options = _engine.Options()
            options.log_errors = False  # a client's bad pattern is its error, not a broker log line
            return _engine.compile(pattern, options)
        return _engine.compile(pattern)
    except (re.error, _ENGINE_ERROR) as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise RegexError(f"SubscribedTopicRegex {pattern!r} is not a valid regular expression: {detail}") from None


@functools.lru_cache(maxsize=1024)
def matching_topics(pattern: str, topics: frozenset[str]) -> frozenset[str]:
    """The topics whose whole name matches ``pattern``; raises ``RegexError``."""
    compiled = compile_regex(pattern)
    return frozenset(t for t in topics if t not in INTERNAL_TOPICS and compiled.fullmatch(t) is not None)
