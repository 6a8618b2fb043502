"""``AclAuthority``: the configured authorizer (``authorizer.class.name``, ``super.users``,
``allow.everyone.if.no.acl.found``) over the ACLs of the latest metadata image."""

from __future__ import annotations

from broker.controller.image import MetadataImage
from broker.security.authorizer import Authorizer
from broker.security.authorizer_config import AuthorizerSettings


class AclAuthority:
    """The configured authorizer (``super.users``, ``allow.everyone.if.no.acl.found``) with the
    ACLs of the latest metadata image. The index is rebuilt only when the image's ACL mapping
    changes identity (it is replaced on every ACL record, shared otherwise): about 2 ms per
    thousand ACLs, on the request that first sees the change."""

    def __init__(self, settings: AuthorizerSettings) -> None:
        self.settings = settings
        self._acls: object = None
        self._authorizer = Authorizer((), settings.super_users, settings.allow_everyone_if_no_acl_found)

    def authorizer(self, image: MetadataImage) -> Authorizer:
        if image.acls is not self._acls:
            self._authorizer = self._authorizer.with_acls(image.acls.values())
            self._acls = image.acls
        return self._authorizer
