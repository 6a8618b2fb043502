"""``AclAuthority``: the configured authorizer (``authorizer.class.name``, ``super.users``,
``allow.everyone.if.no.acl.found``) over the ACLs of the latest metadata image (KIP-801: the
KRaft authorizer reads its ACLs from the metadata log)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from broker.metadata.image import MetadataImage
from broker.security.acl.authorizer import Authorizer
from broker.security.acl.binding import AclBinding
from broker.security.acl.config import AuthorizerSettings

# More changes than this at once (a bulk create or delete): index everything afresh.
INCREMENTAL_LIMIT = 256


class AclAuthority:
    """The configured authorizer (``super.users``, ``allow.everyone.if.no.acl.found``) with the
    ACLs of the latest metadata image. When the image's ACL mapping changes identity (it is
    replaced on every ACL record, shared otherwise), the first request to see it updates the index
    by the ACLs added and removed (``Authorizer.updated``), or re-indexes after a bulk change."""

    def __init__(self, settings: AuthorizerSettings) -> None:
        self.settings = settings
        self._acls: Mapping[uuid.UUID, AclBinding] = {}
        self._authorizer = Authorizer((), settings.super_users, settings.allow_everyone_if_no_acl_found)

    def authorizer(self, image: MetadataImage) -> Authorizer:
        new = image.acls
        if new is not self._acls:
            old = self._acls
            added = new.keys() - old.keys()
            removed = old.keys() - new.keys()
            if len(added) + len(removed) > INCREMENTAL_LIMIT:
                self._authorizer = self._authorizer.with_acls(new.values())
            else:
                self._authorizer = self._authorizer.updated(
                    tuple(new.values()), [new[i] for i in added], [old[i] for i in removed]
                )
            self._acls = new
        return self._authorizer
