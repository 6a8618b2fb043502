"""The compact declaration form (``dsl.py``) and the checks run on every declaration."""

from __future__ import annotations

import pytest

from pyspark_log.wire.dsl import api, parse_fields
from pyspark_log.wire.schema import MAX_VERSION, Versions


def test_versions_notation():
    assert Versions.parse("3+") == Versions(3, MAX_VERSION)
    assert Versions.parse("0-12") == Versions(0, 12)
    assert Versions.parse("7") == Versions(7, 7)
    assert Versions.parse("none").empty
    assert 5 in Versions.parse("3+")
    assert 2 not in Versions.parse("3+")
    assert str(Versions.parse("0-12")) == "0-12"
    assert str(Versions.parse("3+")) == "3+"


def test_parse_nested_fields_and_options():
    (topics, rack) = parse_fields(
        """
        topics        []      null=1+     # comment
          name        string  0-12
          ids         []int32 7+
          leader      {}      12+  tag=0
            epoch     int32   default=-1
        rack          string  11+  default=""
        """
    )
    assert topics.array
    assert topics.is_struct
    assert topics.nullable == Versions(1, MAX_VERSION)
    name, ids, leader = topics.fields
    assert name.versions == Versions(0, 12)
    assert ids.array
    assert ids.type == "int32"
    assert leader.tag == 0
    assert not leader.array
    assert leader.fields[0].default == -1
    assert rack.default == ""
    assert rack.has_default


def test_shared_structs():
    (voters,) = parse_fields("voters  []Replica", {"Replica": "id int32\nend int64 1+"})
    assert [f.name for f in voters.fields] == ["id", "end"]


@pytest.mark.parametrize(
    "text",
    [
        "a int32\n    b int32",  # children under a primitive
        "a []\nb int32",  # struct without fields
        "a whatever",  # unknown type
        "a int32 0+ bogus=1",  # unknown option
        "a []Missing",  # unknown shared struct
        "a int32 default=xyz",  # bad default
        "a",  # no type
    ],
)
def test_parse_errors(text: str):
    with pytest.raises(ValueError):
        parse_fields(text)


@pytest.mark.parametrize(
    "request_text",
    [
        "items int32",  # shadows dict.items
        "Name int32",  # not snake_case
        "a int32\na int64",  # duplicate
        "a int32 null",  # only strings, bytes, records and arrays are nullable
        "a int32 1+ tag=0",  # tagged before the first flexible version (2)
        "a int32 2+ tag=0\nb int32 2+ tag=0",  # duplicate tag
        "a string default=null",  # null default on a non-nullable field
    ],
)
def test_declaration_checks(request_text: str):
    with pytest.raises(ValueError):
        api(0, "0-3", "2+", request=request_text, response="x int8")
