"""``ssl.principal.mapping.rules`` (KIP-371): Kafka's documented examples and the cases of Kafka's
own SslPrincipalMapper tests - which values are valid, how a list is split, what each DN maps to."""

from __future__ import annotations

import pytest

from broker.security.principal_mapping import NoMatchingRule, PrincipalMapper, PrincipalMappingError

pytestmark = pytest.mark.unit

# Kafka's documentation of ssl.principal.mapping.rules
DOCS_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
    "DEFAULT"
)


def test_kafka_documentation_example() -> None:
    mapper = PrincipalMapper.parse(DOCS_RULES)
    assert mapper.name("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "serviceuser"
    assert mapper.name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "adminuser@admin"


def test_kafka_mapper_cases() -> None:
    mapper = PrincipalMapper.parse(
        ", ".join(
            [
                "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
                "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
                "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
                "DEFAULT",
            ]
        )
    )
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_an_escaped_comma_inside_a_name() -> None:
    mapper = PrincipalMapper.parse("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


@pytest.mark.parametrize(
    "rules",
    [
        "DEFAULT",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
        "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
        "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
        "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
        "",
        ",   , , ,      , , ,   ",
        ",,RULE://,,,DEFAULT,,",
    ],
)
def test_valid_rules(rules: str) -> None:
    PrincipalMapper.parse(rules)


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
        "RULE:^CN=(unclosed$/$1/",  # not a regular expression
    ],
)
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(PrincipalMappingError):
        PrincipalMapper.parse(rules)


def test_splitting_keeps_commas_inside_rules_and_skips_empty_entries() -> None:
    mapper = PrincipalMapper.parse("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ")
    assert mapper.name("ABC") == "ABC"
    assert mapper.name("abc") == "abc"
    assert mapper.name("1-2") == "1-2"  # DEFAULT


def test_no_matching_rule_fails_authentication() -> None:
    mapper = PrincipalMapper.parse("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule):
        mapper.name("CN=alice,OU=eng")
    with pytest.raises(NoMatchingRule):
        PrincipalMapper.parse("").name("CN=x")


def test_back_references_beyond_the_groups_are_literal_as_kafka_escapes_them() -> None:
    mapper = PrincipalMapper.parse("RULE:^CN=(.*?),OU=(.*?)$/$1@$4 $12/")
    assert mapper.name("CN=a,OU=b") == "a@$4 a2"  # $4: no such group; $12: group 1 then "2"
    named = PrincipalMapper.parse("RULE:^CN=(?<user>[^,]+),.*$/${user}/U")
    assert named.name("CN=bob,OU=x") == "BOB"
    with pytest.raises(PrincipalMappingError):
        PrincipalMapper.parse("RULE:^CN=(.*)$/$x/")
