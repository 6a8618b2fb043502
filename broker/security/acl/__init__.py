"""ACLs: the model, the authorizer and the per-request authorization rules, in one place.

pylog's authorizer has the semantics of Kafka's ``StandardAuthorizer`` (KRaft, KIP-801) and
``AclAuthorizer`` (Kafka documentation §7.5 "Authorization and ACLs"; KIP-11 the authorizer,
KIP-290 prefixed ACLs, KIP-430 authorized operations, KIP-679 ``authorizeByResourceType``): deny
wins; LITERAL, ``*`` and PREFIXED patterns; ``super.users``; ``allow.everyone.if.no.acl.found``;
ALLOW of READ/WRITE/DELETE/ALTER implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS.
The ACLs live in the cluster metadata (``AccessControlEntryRecord``).

The modules, each named for what it holds (all pure: no clock, file, socket or event loop, and
nothing of ``broker.api``):

* ``binding`` — an ACL (``AclBinding``), what it applies to, and the validation of a new one
  (CreateAcls);
* ``filters`` — ``AclFilter``, the DescribeAcls/DeleteAcls filter and its matching;
* ``authorizer`` — ``Authorizer``, the decisions over one set of ACLs (indexed), and the
  operations each resource type reports;
* ``config`` — the start-up keys ``authorizer.class.name``, ``super.users``,
  ``allow.everyone.if.no.acl.found``;
* ``authority`` — ``AclAuthority``, the configured authorizer kept current with the metadata
  image's ACLs;
* ``checks`` — ``CHECKS``, what each API checks (Kafka's ``KafkaApis``), as data;
* ``request`` — a request under the checks: who asks, what is left of it, the refusals;
* ``rules`` — applies an API's checks; the named rules are in ``topic_rules``, ``group_rules``,
  ``transaction_rules`` and ``cluster_rules``, by what they decide.

Who uses them: ``broker.api.authz`` wraps the request handlers with ``rules.apply``;
``broker.api.acls`` answers DescribeAcls/CreateAcls/DeleteAcls; the controller records ACL
changes as metadata records (``broker.controller.acl_changes``, ``acl_control``) and the
metadata image holds the bindings (``broker.metadata.image``).
"""
