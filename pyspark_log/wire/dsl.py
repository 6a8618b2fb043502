"""Our compact declaration form: one indented line per field, parsed once at import.

Each API is declared once with ``api(key, valid, flexible, request=..., response=...)``; the
request and response are blocks of lines::

    <name>  <type>  [<versions>]  [null[=<versions>]]  [tag=<n>]  [default=<value>]

* ``name`` is Kafka's field name in snake_case (``ThrottleTimeMs`` -> ``throttle_time_ms``);
* ``type`` is a primitive (``int8 int16 int32 int64 uint16 uint32 float64 bool uuid string
  bytes records``), ``[]<primitive>`` for an array of it, ``[]`` for an array of structs or
  ``{}`` for one nested struct (their fields follow, indented deeper), or ``[]Name`` / ``{}Name``
  for a struct declared once in the ``structs`` mapping and used in several places;
* ``versions`` is Kafka's notation (``0+``, ``3+``, ``0-12``, ``7``; default ``0+``);
* ``null`` makes the field nullable in all its versions, ``null=4+`` in those versions;
* ``tag=n`` makes it a KIP-482 tagged field with tag ``n`` in its versions;
* ``default=`` takes ``null``, ``true``, ``false``, an integer (``-1``, ``0x7fffffff``) or ``""``.

``#`` starts a comment. Field facts come from Kafka's published message schemas
(``clients/src/main/resources/common/message/*.json``) and the protocol guide.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pyspark_log.wire.api_keys import ApiKey
from pyspark_log.wire.schema import ALL_VERSIONS, PRIMITIVES, Api, Field, Schema, Versions

_VERSIONS = re.compile(r"^(\d+\+?|\d+-\d+|none)$")
_INT_TYPES = frozenset({"int8", "int16", "int32", "int64", "uint16", "uint32"})


def _parse_default(text: str, type_: str, where: str) -> Any:
    if text == "null":
        return None
    if type_ == "bool":
        if text not in ("true", "false"):
            raise ValueError(f"{where}: bool default must be true or false")
        return text == "true"
    if type_ in _INT_TYPES:
        return int(text, 0)
    if type_ == "float64":
        return float(text)
    if type_ == "string" and text in ('""', "''"):
        return ""
    raise ValueError(f"{where}: unsupported default {text!r} for {type_}")


def _parse_line(text: str, where: str) -> tuple[str, str, dict[str, str], Versions]:
    tokens = text.split()
    if len(tokens) < 2:
        raise ValueError(f"{where}: expected '<name> <type> [versions] [options]': {text!r}")
    name, type_, rest = tokens[0], tokens[1], tokens[2:]
    versions = ALL_VERSIONS
    if rest and _VERSIONS.match(rest[0]):
        versions = Versions.parse(rest.pop(0))
    options: dict[str, str] = {}
    for token in rest:
        key, _, value = token.partition("=")
        if key not in ("null", "tag", "default") or key in options:
            raise ValueError(f"{where}: bad option {token!r}")
        options[key] = value
    return name, type_, options, versions


def parse_fields(text: str, structs: Mapping[str, str] | None = None, where: str = "") -> tuple[Field, ...]:
    """Parse an indented block of field lines into ``Field`` objects."""
    lines: list[tuple[int, str]] = []
    for raw in text.splitlines():
        body = raw.split("#", 1)[0].rstrip()
        if body.strip():
            lines.append((len(body) - len(body.lstrip(" ")), body.strip()))
    fields, consumed = _parse_block(lines, 0, structs or {}, where)
    if consumed != len(lines):
        raise ValueError(f"{where}: bad indentation near {lines[consumed][1]!r}")
    return fields


def _parse_block(
    lines: list[tuple[int, str]], start: int, structs: Mapping[str, str], where: str
) -> tuple[tuple[Field, ...], int]:
    fields: list[Field] = []
    if start >= len(lines):
        return (), start
    indent = lines[start][0]
    i = start
    while i < len(lines) and lines[i][0] == indent:
        name, type_, options, versions = _parse_line(lines[i][1], f"{where}.{lines[i][1].split()[0]}")
        at = f"{where}.{name}"
        i += 1
        array = type_.startswith("[]")
        base = type_[2:] if array else type_
        children: tuple[Field, ...] = ()
        if base.startswith("{}"):
            if array:
                raise ValueError(f"{at}: '[]' or '{{}}', not both")
            base = base[2:]
        elif not array and base not in PRIMITIVES:
            raise ValueError(f"{at}: unknown type {type_!r}")
        if base == "" or base not in PRIMITIVES:
            if base:  # a shared struct
                if base not in structs:
                    raise ValueError(f"{at}: unknown struct {base!r}")
                children = parse_fields(structs[base], structs, f"{where}:{base}")
            elif i < len(lines) and lines[i][0] > indent:
                children, i = _parse_block(lines, i, structs, at)
            if not children:
                raise ValueError(f"{at}: a struct needs fields")
            base = "struct"
        elif i < len(lines) and lines[i][0] > indent:
            raise ValueError(f"{at}: a {base} has no nested fields")
        nullable = Versions(1, 0)
        if "null" in options:
            nullable = Versions.parse(options["null"]) if options["null"] else versions
        has_default = "default" in options
        default = _parse_default(options["default"], base, at) if has_default else None
        fields.append(
            Field(
                name=name,
                type=base,
                versions=versions,
                array=array,
                nullable=nullable,
                tag=int(options["tag"]) if "tag" in options else None,
                default=default,
                has_default=has_default,
                fields=children,
            )
        )
    if i < len(lines) and lines[i][0] > indent:
        raise ValueError(f"{where}: unexpected indentation at {lines[i][1]!r}")
    return tuple(fields), i


def api(
    key: int,
    valid: str,
    flexible: str,
    *,
    request: str,
    response: str,
    structs: Mapping[str, str] | None = None,
) -> Api:
    """Declare one API: its key, valid versions, flexible versions and both bodies."""
    name = ApiKey(key).title
    valid_v, flexible_v = Versions.parse(valid), Versions.parse(flexible)
    return Api(
        key=key,
        name=name,
        valid=valid_v,
        flexible=flexible_v,
        request=Schema(f"{name}Request", parse_fields(request, structs, f"{name}Request"), valid_v, flexible_v),
        response=Schema(f"{name}Response", parse_fields(response, structs, f"{name}Response"), valid_v, flexible_v),
    )
