"""The authorizer's start-up keys, Kafka's names (Kafka documentation §7.5 "Authorization and ACLs")
(pure):

* ``authorizer.class.name``: unset or empty — no authorizer, every client may do everything
  (Kafka's default); ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (KRaft) or
  ``kafka.security.authorizer.AclAuthorizer`` (ZooKeeper mode) — pylog's authorizer, which has
  StandardAuthorizer's semantics and reads the ACLs from the cluster metadata; anything else is
  refused at start-up (``refusal``);
* ``super.users``: ``User:alice;User:bob`` (semicolon separated, as Kafka);
* ``allow.everyone.if.no.acl.found``: ``true``/``false`` (default false).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

CLASS_KEY = "authorizer.class.name"
SUPER_USERS_KEY = "super.users"
ALLOW_EVERYONE_KEY = "allow.everyone.if.no.acl.found"
KEYS = frozenset({CLASS_KEY, SUPER_USERS_KEY, ALLOW_EVERYONE_KEY})
ACCEPTED_CLASSES = frozenset(
    {"org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer"}
)


@dataclass(frozen=True)
class AuthorizerSettings:
    super_users: frozenset[str]
    allow_everyone_if_no_acl_found: bool


def refusal(raw: Mapping[str, str]) -> str | None:
    """A message naming the key and the fix when the authorizer keys cannot be honoured."""
    name = raw.get(CLASS_KEY, "").strip()
    if name and name not in ACCEPTED_CLASSES:
        return (
            f"config {CLASS_KEY}={name} cannot be honoured: pylog's authorizer implements Kafka's StandardAuthorizer; "
            f"set it to {' or '.join(sorted(ACCEPTED_CLASSES))}, or remove it to run without authorization "
            "(see docs/security.md)"
        )
    flag = raw.get(ALLOW_EVERYONE_KEY, "false").strip().lower()
    if flag not in ("true", "false"):
        return f"config {ALLOW_EVERYONE_KEY}={raw[ALLOW_EVERYONE_KEY]!r} must be true or false"
    for user in _super_users(raw):
        if ":" not in user:
            return f"config {SUPER_USERS_KEY}: {user!r} is not a principal; write User:<name> (semicolon separated)"
    return None


def _super_users(raw: Mapping[str, str]) -> list[str]:
    return [u.strip() for u in raw.get(SUPER_USERS_KEY, "").split(";") if u.strip()]


def settings(raw: Mapping[str, str]) -> AuthorizerSettings | None:
    """The authorizer to run, or None when ``authorizer.class.name`` is unset (``refusal`` first)."""
    if not raw.get(CLASS_KEY, "").strip():
        return None
    return AuthorizerSettings(
        frozenset(_super_users(raw)), raw.get(ALLOW_EVERYONE_KEY, "false").strip().lower() == "true"
    )
