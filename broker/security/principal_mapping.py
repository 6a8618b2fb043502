"""Kafka's ``ssl.principal.mapping.rules``: the principal name of a TLS client from the distinguished
name of its certificate (RFC 2253, as ``broker.network.tls`` renders it, e.g.
``CN=alice,OU=eng,O=pylog``).

The value is a comma-separated list of rules, tried in order; the first that applies names the
principal (``User:<name>``)::

    RULE:<pattern>/<replacement>/[L|U]    the whole DN must match <pattern> (a regular expression);
                                          every match of it in the DN is replaced by <replacement>
                                          ($1.. are its groups, \\ escapes), then lower- (L) or
                                          upper-cased (U)
    DEFAULT                               the DN itself (Kafka's default value)

Commas inside a rule belong to it (``RULE:^CN=(.*?),OU=(.*?)$/$1/``); empty entries are ignored; a
``\\`` escapes ``/`` and ``\\`` inside pattern and replacement. A DN no rule applies to fails the
TLS authentication (Kafka's ``NoMatchingRule``). ``PrincipalMapper.parse`` raises
``PrincipalMappingError`` for a value Kafka refuses (``default``, ``DEFAULT/L``, a rule without
its closing ``/``, ``/LU``...) or a pattern Python's ``re`` cannot compile.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# One rule's grammar (a rule is DEFAULT, a RULE: with pattern, replacement and optional case flag,
# or, to let the splitter skip past anything else, any text - refused by the parser).
_SEGMENT = r"((?:\\.|[^\\/])*)"
_RULE = rf"(DEFAULT)|RULE:{_SEGMENT}/{_SEGMENT}/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(rf"\s*({_RULE})\s*(,\s*|$)", re.DOTALL)
_PARSER = re.compile(_RULE, re.DOTALL)


class PrincipalMappingError(ValueError):
    """An ``ssl.principal.mapping.rules`` value that cannot be used."""


class NoMatchingRule(Exception):
    """No rule applies to the distinguished name: the TLS client is not authenticated."""


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: Callable[[re.Match[str]], str] | None = None
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None or self.replacement is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(self.replacement, dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


class PrincipalMapper:
    """The rules of one listener; ``name(dn)`` is the principal name or raises NoMatchingRule."""

    def __init__(self, rules: list[_Rule], text: str) -> None:
        self._rules = rules
        self._text = text

    def __repr__(self) -> str:
        return f"PrincipalMapper({self._text!r})"

    @classmethod
    def parse(cls, text: str) -> PrincipalMapper:
        rules: list[_Rule] = []
        for entry in _split(text):
            match = _PARSER.match(entry)
            if match is None or match.end() != len(entry):
                rest = entry[match.end() :] if match is not None else entry
                raise PrincipalMappingError(
                    f"invalid rule {entry!r} (unmatched: {rest!r}); use RULE:<pattern>/<replacement>/[L|U] or DEFAULT"
                )
            if match.group(1) is not None:
                rules.append(_Rule(None))
            elif match.group(2) is not None:
                rules.append(_compile(match.group(2), match.group(3), match.group(4)))
        return cls(rules, text)

    def name(self, dn: str) -> str:
        for rule in self._rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules applies to {dn}")


def _split(text: str) -> list[str]:
    """The entries of ``text``, commas inside a rule kept (Kafka's splitting)."""
    text = text.strip()
    out = []
    pos = 0
    while pos <= len(text):
        match = _SPLITTER.search(text, pos)
        if match is None:
            break
        out.append(match.group(1))
        pos = match.end() if match.end() > pos else pos + 1
    return out


def _compile(pattern: str, replacement: str, case: str) -> _Rule:
    python_pattern = re.sub(r"(?<!\\)\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", pattern)  # Java's (?<name>...)
    try:
        compiled = re.compile(python_pattern)
    except re.error as exc:
        raise PrincipalMappingError(f"rule pattern {pattern!r} is not a regular expression: {exc}") from None
    return _Rule(compiled, _replacement(replacement, compiled), case)


def _replacement(text: str, pattern: re.Pattern[str]) -> Callable[[re.Match[str]], str]:
    """Java's replacement syntax: ``$n`` a group (digits taken while they name a group; a first
    digit above the group count is literal, as Kafka escapes it), ``${name}`` a named group,
    ``\\x`` a literal x."""
    groups = pattern.groups
    literal: list[str] = []
    parts: list[str | int] = []  # literal text, or a group (number or name)

    def group(ref: int | str) -> None:
        parts.append("".join(literal))
        literal.clear()
        parts.append(ref)

    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 == len(text):
                raise PrincipalMappingError(f"replacement {text!r} ends with a lone backslash")
            literal.append(text[i + 1])
            i += 2
        elif ch == "$" and text[i + 1 : i + 2] == "{":
            end = text.find("}", i)
            if end < 0:
                raise PrincipalMappingError(f"replacement {text!r}: '${{' without '}}'")
            if text[i + 2 : end] not in pattern.groupindex:
                raise PrincipalMappingError(
                    f"replacement {text!r}: the pattern has no group named {text[i + 2 : end]!r}"
                )
            group(text[i + 2 : end])
            i = end + 1
        elif ch == "$" and text[i + 1 : i + 2].isdigit():
            ref = int(text[i + 1])
            j = i + 2
            if ref > groups:
                literal.append(text[i:j])  # not a group: literal, as Kafka treats it
            else:
                while j < len(text) and text[j].isdigit() and ref * 10 + int(text[j]) <= groups:
                    ref = ref * 10 + int(text[j])
                    j += 1
                group(ref)
            i = j
        elif ch == "$":
            raise PrincipalMappingError(f"replacement {text!r}: '$' must be followed by a group number (or \\$)")
        else:
            literal.append(ch)
            i += 1
    parts.append("".join(literal))

    def expand(match: re.Match[str]) -> str:
        # parts alternate: literal, group, literal, ..., literal
        return "".join(str(part) if k % 2 == 0 else (match.group(part) or "") for k, part in enumerate(parts))

    return expand
