"""Generate one encoder and one decoder per (schema, version) from the declared fields.

The generated functions are plain Python compiled once and cached by ``Schema`` (as
``dataclasses`` and ``collections.namedtuple`` do), so the schema is interpreted at generation
time, never per call. What the generator does to keep the hot path (Produce, Fetch) short:

* runs of consecutive fixed-width fields are packed/unpacked with ONE precompiled
  ``struct.Struct`` (e.g. a Fetch partition's ``>ihqqq``);
* nested structs and arrays of structs are inlined as loops (no call per element);
* arrays of fixed-width numbers are (un)packed in one ``struct`` call;
* varint lengths take a one-byte fast path; records are zero-copy ``memoryview`` slices on
  decode and are appended as given on encode (so a transport may pass file regions).

Safety: the source is built only from our own declarations; field names are checked to be
snake_case identifiers (``fields.check_fields``) and every value is a constant or a namespace
name, never text from the wire.

Generated signatures: ``encode(m: Mapping, out: list) -> None`` appends chunks to ``out``;
``decode(buf: memoryview, pos: int) -> (Message, pos)``. Errors: decoders raise ``DecodeError``
for bad lengths and nulls, and let ``struct.error`` / ``IndexError`` / ``UnicodeDecodeError``
escape for truncation (``Schema.decode`` converts them); encoders raise ``EncodeError`` for
nulls and let ``struct.error`` / ``TypeError`` escape (``Schema.encode`` converts them).
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from pyspark_log.wire.errors import DecodeError, EncodeError
from pyspark_log.wire.fields import Decoder, Encoder, Field
from pyspark_log.wire.message import Message
from pyspark_log.wire.types import INT16, INT32, ZERO_UUID, read_uvarint, uuid_bytes, write_uvarint

_FMT = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I",
    "float64": "d", "bool": "?", "uuid": "16s",
}  # fmt: skip
_ONE_BYTE = tuple(bytes((i,)) for i in range(128))


def _bad_length(where: str, n: int) -> DecodeError:
    return DecodeError(f"{where}: length/count {n} is not allowed here")


def _short(where: str) -> DecodeError:
    return DecodeError(f"{where}: truncated")


def _null(where: str) -> EncodeError:
    return EncodeError(f"{where}: null is not allowed in this version")


def _skip_tagged(buf: memoryview, pos: int) -> int:
    """Skip a tagged-field section none of whose tags we know; returns the position after it."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise DecodeError("tagged field: truncated")
    return pos


_BASE_NAMESPACE: dict[str, Any] = {
    "_M": Message,
    "_uv": read_uvarint,
    "_uvw": write_uvarint,
    "_ONE": _ONE_BYTE,
    "_h": INT16.unpack_from,
    "_i": INT32.unpack_from,
    "_hp": INT16.pack,
    "_ip": INT32.pack,
    "_UUID": uuid.UUID,
    "_ZU": ZERO_UUID,
    "_Z16": bytes(16),
    "_ub": uuid_bytes,
    "_unpack_from": struct.unpack_from,
    "_pack": struct.pack,
    "_bad": _bad_length,
    "_short": _short,
    "_null": _null,
    "_skip": _skip_tagged,
}


class _Emitter:
    """Accumulates generated lines, fresh local names and namespace constants for one
    (schema, version); ``flexible`` selects compact lengths and tagged sections."""

    def __init__(self, title: str, version: int, flexible: bool) -> None:
        self.title = title
        self.version = version
        self.flexible = flexible
        self.lines: list[str] = []
        self.ns: dict[str, Any] = dict(_BASE_NAMESPACE)
        self._count = 0
        self._structs: dict[str, str] = {}

    def tmp(self, hint: str) -> str:
        self._count += 1
        return f"{hint}{self._count}"

    def const(self, value: Any, hint: str = "_k") -> str:
        name = self.tmp(hint)
        self.ns[name] = value
        return name

    def struct(self, fmt: str) -> str:
        name = self._structs.get(fmt)
        if name is None:
            name = self._structs[fmt] = self.const(struct.Struct(fmt), "_S")
        return name

    def emit(self, ind: int, text: str) -> None:
        self.lines.append("    " * ind + text)

    def finish(self, fn_name: str) -> tuple[str, Any]:
        source = "\n".join(self.lines) + "\n"
        code = compile(source, f"<pylog.wire {self.title}>", "exec")
        namespace = dict(self.ns)
        exec(code, namespace)  # noqa: S102 -- source generated from our own declarations only
        return source, namespace[fn_name]

    # -- shared helpers ------------------------------------------------------------------------

    def literal(self, value: Any) -> str:
        if value is None or isinstance(value, bool | int | float | str | bytes):
            return repr(value)
        if value == ZERO_UUID:
            return "_ZU"
        return self.const(value, "_D")

    def default_expr(self, f: Field) -> str:
        """An expression giving a fresh default of ``f``."""
        if f.array:
            return "None" if f.has_default and f.default is None else "[]"
        if f.is_struct:
            if f.has_default and f.default is None:
                return "None"  # a nullable struct defaulting to null (e.g. an absent tagged one)
            return "_M(" + ", ".join(f"{x.name}={self.default_expr(x)}" for x in f.fields) + ")"
        return self.literal(f.default_value(self.version))

    def regular(self, fields: tuple[Field, ...]) -> list[Field]:
        """The fields on the wire in declaration order, tagged ones excluded."""
        return [f for f in fields if f.present(self.version) and not f.tagged_in(self.version)]

    def tagged(self, fields: tuple[Field, ...]) -> list[Field]:
        """The tagged fields of this version in ascending tag order."""
        return sorted((f for f in fields if f.tagged_in(self.version)), key=lambda f: f.tag or 0)


def _is_fixed(f: Field) -> bool:
    return not f.array and f.type in _FMT


def _element(f: Field) -> Field:
    """The element of an array field, as a non-nullable field of its own."""
    return Field(f.name, f.type, fields=f.fields)


def _min_size(em: _Emitter, f: Field) -> int:
    """The fewest bytes one value of ``f`` takes on the wire (arrays: their length prefix)."""
    if f.array:
        return 1 if em.flexible else 4
    if f.is_struct:
        return sum(_min_size(em, x) for x in em.regular(f.fields)) + (1 if em.flexible else 0)
    if f.type in _FMT:
        return struct.calcsize(">" + _FMT[f.type])
    if em.flexible:
        return 1
    return 2 if f.type == "string" else 4


# -- decoder -----------------------------------------------------------------------------------


def _emit_uvarint(em: _Emitter, ind: int, var: str) -> None:
    em.emit(ind, f"{var} = buf[pos]")
    em.emit(ind, "pos += 1")
    em.emit(ind, f"if {var} > 127:")
    em.emit(ind + 1, f"{var}, pos = _uv(buf, pos - 1)")


def _emit_length(em: _Emitter, ind: int, *, wide: bool) -> str:
    """Read a length or count into a fresh local: -1 means null (compact 0 becomes -1)."""
    n = em.tmp("n")
    if em.flexible:
        _emit_uvarint(em, ind, n)
        em.emit(ind, f"{n} -= 1")
    elif wide:
        em.emit(ind, f"{n} = _i(buf, pos)[0]")
        em.emit(ind, "pos += 4")
    else:
        em.emit(ind, f"{n} = _h(buf, pos)[0]")
        em.emit(ind, "pos += 2")
    return n


def _emit_null_check(em: _Emitter, ind: int, f: Field, *, n: str, var: str, where: str) -> None:
    """``if n < 0:`` null handling; the caller emits the non-null branch under ``else:``."""
    em.emit(ind, f"if {n} < 0:")
    if f.nullable_in(em.version):
        em.emit(ind + 1, f"if {n} != -1:")
        em.emit(ind + 2, f"raise _bad({where!r}, {n})")
        em.emit(ind + 1, f"{var} = None")
    else:
        em.emit(ind + 1, f"raise _bad({where!r}, {n})")
    em.emit(ind, "else:")


def _dec_value(em: _Emitter, f: Field, ind: int, where: str) -> str:
    """Emit code reading one value of ``f`` at ``pos``; returns the local holding it."""
    var = em.tmp("v")
    if f.array:
        _dec_array(em, f, ind, where, var)
    elif f.is_struct and f.nullable_in(em.version) and not f.tagged_in(em.version):
        # a nullable struct: an int8 marker, -1 null, 1 present (Kafka's generated readers)
        em.emit(ind, f"{var} = None")
        em.emit(ind, "pos += 1")
        em.emit(ind, "if buf[pos - 1] == 1:")
        em.emit(ind + 1, f"{var} = {_dec_struct(em, f.fields, ind + 1, where)}")
        em.emit(ind, "elif buf[pos - 1] != 0xFF:")
        em.emit(ind + 1, f"raise _bad({where!r}, buf[pos - 1])")
    elif f.is_struct:
        em.emit(ind, f"{var} = {_dec_struct(em, f.fields, ind, where)}")
    elif f.type in _FMT:
        fmt = ">" + _FMT[f.type]
        em.emit(ind, f"{var} = {em.struct(fmt)}.unpack_from(buf, pos)[0]")
        em.emit(ind, f"pos += {struct.calcsize(fmt)}")
        if f.type == "uuid":
            em.emit(ind, f"{var} = _ZU if {var} == _Z16 else _UUID(bytes={var})")
    else:
        _dec_sized(em, f, ind, where, var)
    return var


def _dec_sized(em: _Emitter, f: Field, ind: int, where: str, var: str) -> None:
    """A string, bytes or records value: length, null check, bounds check, slice."""
    n = _emit_length(em, ind, wide=f.type != "string")
    _emit_null_check(em, ind, f, n=n, var=var, where=where)
    e = em.tmp("e")
    em.emit(ind + 1, f"{e} = pos + {n}")
    em.emit(ind + 1, f"if {e} > blen:")
    em.emit(ind + 2, f"raise _short({where!r})")
    if f.type == "string":
        em.emit(ind + 1, f"{var} = str(buf[pos:{e}], 'utf-8')")
    elif f.type == "bytes":
        em.emit(ind + 1, f"{var} = buf[pos:{e}].tobytes()")
    else:  # records: a zero-copy slice of the frame
        em.emit(ind + 1, f"{var} = buf[pos:{e}]")
    em.emit(ind + 1, f"pos = {e}")


def _dec_array(em: _Emitter, f: Field, ind: int, where: str, var: str) -> None:
    c = _emit_length(em, ind, wide=True)
    _emit_null_check(em, ind, f, n=c, var=var, where=where)
    ind += 1
    elem = _element(f)
    min_size = _min_size(em, elem)
    if min_size:  # refuse counts the remaining bytes cannot hold before allocating anything
        em.emit(ind, f"if {c} * {min_size} > blen - pos:")
        em.emit(ind + 1, f"raise _short({where!r})")
    if _is_fixed(elem) and f.type != "uuid":
        em.emit(ind, f"{var} = list(_unpack_from('>%d{_FMT[f.type]}' % {c}, buf, pos))")
        em.emit(ind, f"pos += {c} * {min_size}")
        return
    ap = em.tmp("ap")
    em.emit(ind, f"{var} = []")
    em.emit(ind, f"{ap} = {var}.append")
    em.emit(ind, f"for _ in range({c}):")
    if f.is_struct:
        em.emit(ind + 1, f"{ap}({_dec_struct(em, f.fields, ind + 1, where)})")
    else:
        em.emit(ind + 1, f"{ap}({_dec_value(em, elem, ind + 1, where)})")


def _dec_struct(em: _Emitter, fields: tuple[Field, ...], ind: int, where: str) -> str:
    """Emit code reading a struct's fields; returns the expression building its Message."""
    values: dict[str, str] = {}
    run: list[Field] = []

    def flush() -> None:
        if not run:
            return
        fmt = ">" + "".join(_FMT[x.type] for x in run)
        names = [em.tmp("v") for _ in run]
        em.emit(ind, f"{', '.join(names)}, = {em.struct(fmt)}.unpack_from(buf, pos)")
        em.emit(ind, f"pos += {struct.calcsize(fmt)}")
        for x, name in zip(run, names, strict=True):
            if x.type == "uuid":
                em.emit(ind, f"{name} = _ZU if {name} == _Z16 else _UUID(bytes={name})")
            values[x.name] = name
        run.clear()

    for f in em.regular(fields):
        if _is_fixed(f):
            run.append(f)
            continue
        flush()
        values[f.name] = _dec_value(em, f, ind, f"{where}.{f.name}")
    flush()
    if em.flexible:
        _dec_tagged(em, fields, ind, where, values)
    args = ", ".join(f"{f.name}={values.get(f.name) or em.default_expr(f)}" for f in fields)
    return f"_M({args})"


def _dec_tagged(em: _Emitter, fields: tuple[Field, ...], ind: int, where: str, values: dict[str, str]) -> None:
    tagged = em.tagged(fields)
    if not tagged:  # the common case: an empty section is one zero byte
        em.emit(ind, "if buf[pos]:")
        em.emit(ind + 1, "pos = _skip(buf, pos)")
        em.emit(ind, "else:")
        em.emit(ind + 1, "pos += 1")
        return
    for f in tagged:
        var = values[f.name] = em.tmp("t")
        em.emit(ind, f"{var} = {em.default_expr(f)}")
    count = em.tmp("nt")
    _emit_uvarint(em, ind, count)
    em.emit(ind, f"for _ in range({count}):")
    tag, size, end = em.tmp("tg"), em.tmp("sz"), em.tmp("e")
    _emit_uvarint(em, ind + 1, tag)
    _emit_uvarint(em, ind + 1, size)
    em.emit(ind + 1, f"{end} = pos + {size}")
    em.emit(ind + 1, f"if {end} > blen:")
    em.emit(ind + 2, f"raise _short({where + '.<tagged>'!r})")
    for i, f in enumerate(tagged):
        em.emit(ind + 1, f"{'if' if i == 0 else 'elif'} {tag} == {f.tag}:")
        got = _dec_value(em, f, ind + 2, f"{where}.{f.name}")
        em.emit(ind + 2, f"{values[f.name]} = {got}")
    em.emit(ind + 1, f"pos = {end}")  # also skips tags we do not know


def generate_decoder(name: str, fields: tuple[Field, ...], version: int, *, flexible: bool) -> tuple[str, Decoder]:
    """The source and function of ``decode(buf, pos) -> (Message, pos)`` for ``version`` of the
    schema ``name`` with ``fields`` (``flexible``: whether ``version`` is a flexible version)."""
    em = _Emitter(f"decode {name} v{version}", version, flexible)
    em.emit(0, "def decode(buf, pos):")
    em.emit(1, "blen = len(buf)")
    result = _dec_struct(em, fields, 1, name)
    em.emit(1, f"return {result}, pos")
    source, fn = em.finish("decode")
    return source, fn


def compile_decoder(name: str, fields: tuple[Field, ...], version: int, *, flexible: bool) -> Decoder:
    return generate_decoder(name, fields, version, flexible=flexible)[1]


# -- encoder -----------------------------------------------------------------------------------


def _emit_write_length(em: _Emitter, ind: int, w: str, length: str, *, wide: bool) -> None:
    if em.flexible:
        n = em.tmp("n")
        em.emit(ind, f"{n} = {length} + 1")
        em.emit(ind, f"{w}(_ONE[{n}] if {n} < 128 else _uvw({n}))")
    else:
        em.emit(ind, f"{w}({'_ip' if wide else '_hp'}({length}))")


def _emit_write_null(em: _Emitter, ind: int, f: Field, w: str, where: str) -> None:
    if f.nullable_in(em.version):
        wide = f.array or f.type != "string"
        null = "b'\\x00'" if em.flexible else ("b'\\xff\\xff\\xff\\xff'" if wide else "b'\\xff\\xff'")
        em.emit(ind, f"{w}({null})")
    else:
        em.emit(ind, f"raise _null({where!r})")


def _enc_value(em: _Emitter, f: Field, ind: int, *, v: str, w: str, where: str) -> None:
    """Emit code writing the value held in local ``v`` with writer ``w``."""
    if f.is_struct and not f.array and f.nullable_in(em.version) and not f.tagged_in(em.version):
        em.emit(ind, f"if {v} is None:")
        em.emit(ind + 1, f"{w}(b'\\xff')")  # a nullable struct: the int8 marker -1 (null) or 1
        em.emit(ind, "else:")
        em.emit(ind + 1, f"{w}(b'\\x01')")
        _enc_struct(em, f.fields, ind + 1, m=v, w=w, where=where)
        return
    if f.is_struct and not f.array:
        m = em.tmp("m")
        em.emit(ind, f"{m} = {{}} if {v} is None else {v}")
        _enc_struct(em, f.fields, ind, m=m, w=w, where=where)
        return
    if _is_fixed(f):
        if f.type == "uuid":
            em.emit(ind, f"{w}(_ub({v}))")
        else:
            em.emit(ind, f"{w}({em.struct('>' + _FMT[f.type])}.pack({v}))")
        return
    em.emit(ind, f"if {v} is None:")
    _emit_write_null(em, ind + 1, f, w, where)
    em.emit(ind, "else:")
    ind += 1
    if f.array:
        _emit_write_length(em, ind, w, f"len({v})", wide=True)
        elem = _element(f)
        if _is_fixed(elem) and f.type != "uuid":
            em.emit(ind, f"{w}(_pack('>%d{_FMT[f.type]}' % len({v}), *{v}))")
            return
        item = em.tmp("x")
        em.emit(ind, f"for {item} in {v}:")
        if f.is_struct:
            _enc_struct(em, f.fields, ind + 1, m=item, w=w, where=where)
        else:
            _enc_value(em, elem, ind + 1, v=item, w=w, where=where)
        return
    if f.type == "string":
        raw = em.tmp("b")
        em.emit(ind, f"{raw} = {v}.encode('utf-8')")
        _emit_write_length(em, ind, w, f"len({raw})", wide=False)
        em.emit(ind, f"{w}({raw})")
    else:  # bytes, records: appended as given (bytes-like, or a sized object for sendfile)
        _emit_write_length(em, ind, w, f"len({v})", wide=True)
        em.emit(ind, f"{w}({v})")


def _enc_struct(em: _Emitter, fields: tuple[Field, ...], ind: int, *, m: str, w: str, where: str) -> None:
    g = em.tmp("g")
    em.emit(ind, f"{g} = {m}.get")
    run: list[Field] = []
    has_tagged = em.flexible and bool(em.tagged(fields))

    def flush(pad: bool = False) -> None:
        """Pack the pending fixed-width run; ``pad`` folds in the empty tagged section."""
        if not run:
            return
        args = []
        for x in run:
            got = f"{g}({x.name!r}, {em.literal(x.default_value(em.version))})"
            args.append(f"_ub({got})" if x.type == "uuid" else got)
        fmt = ">" + "".join(_FMT[x.type] for x in run) + ("x" if pad else "")
        em.emit(ind, f"{w}({em.struct(fmt)}.pack({', '.join(args)}))")
        run.clear()

    for f in em.regular(fields):
        if _is_fixed(f):
            run.append(f)
            continue
        flush()
        v = em.tmp("v")
        if f.array:
            default = "None" if f.has_default and f.default is None else "()"
        elif f.is_struct:
            default = "None"
        else:
            default = em.literal(f.default_value(em.version))
        em.emit(ind, f"{v} = {g}({f.name!r}, {default})")
        _enc_value(em, f, ind, v=v, w=w, where=f"{where}.{f.name}")
    if em.flexible and not has_tagged and run:
        flush(pad=True)  # the struct ends with an empty tagged section: one zero byte
        return
    flush()
    if em.flexible:
        _enc_tagged(em, fields, ind, g=g, w=w, where=where)


def _enc_tagged(em: _Emitter, fields: tuple[Field, ...], ind: int, *, g: str, w: str, where: str) -> None:
    """Tagged fields whose value differs from the default, ascending by tag (KIP-482)."""
    tagged = em.tagged(fields)
    if not tagged:
        em.emit(ind, f"{w}(b'\\x00')")
        return
    chunks = em.tmp("tl")
    em.emit(ind, f"{chunks} = []")
    for f in tagged:
        v = em.tmp("v")
        default = em.const(f.default_value(em.version), "_TD")  # compared with, never handed out
        em.emit(ind, f"{v} = {g}({f.name!r}, {default})")
        em.emit(ind, f"if {v} is not {default} and {v} != {default}:")
        out = em.tmp("o")
        em.emit(ind + 1, f"{out} = []")
        _enc_value(em, f, ind + 1, v=v, w=f"{out}.append", where=f"{where}.{f.name}")
        data = em.tmp("d")
        em.emit(ind + 1, f"{data} = b''.join({out})")
        em.emit(ind + 1, f"{chunks}.append(_uvw({f.tag}) + _uvw(len({data})) + {data})")
    em.emit(ind, f"{w}(_uvw(len({chunks})))")
    item = em.tmp("x")
    em.emit(ind, f"for {item} in {chunks}:")
    em.emit(ind + 1, f"{w}({item})")


def generate_encoder(name: str, fields: tuple[Field, ...], version: int, *, flexible: bool) -> tuple[str, Encoder]:
    """The source and function of ``encode(m, out) -> None`` for ``version`` (arguments as for
    ``generate_decoder``)."""
    em = _Emitter(f"encode {name} v{version}", version, flexible)
    em.emit(0, "def encode(m, out):")
    em.emit(1, "w = out.append")
    _enc_struct(em, fields, 1, m="m", w="w", where=name)
    source, fn = em.finish("encode")
    return source, fn


def compile_encoder(name: str, fields: tuple[Field, ...], version: int, *, flexible: bool) -> Encoder:
    return generate_encoder(name, fields, version, flexible=flexible)[1]
