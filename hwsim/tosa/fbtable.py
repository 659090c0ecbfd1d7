"""Flatbuffer tables read and written from a parsed schema, with no generated code.

``read_table`` turns a table into a dict (field name -> value) and ``write_table`` builds one
from such a dict, both driven by a ``hwsim.tosa.schema.Schema``: a field's vtable slot is its
position in the table (a union field takes two: its type tag, then the table), scalars take
their schema default when absent. Values: Python ints/bools for scalars, enum member names for
enum fields, ``str`` for strings, numpy arrays for scalar vectors (``[ubyte]`` as ``bytes``),
lists of dicts for table vectors, and ``(member, dict)`` for a union (``None`` when NONE).
Used for the TOSA 0.80 files, whose schema tosa-tools no longer ships. Every read is bounds-
checked, so a truncated or corrupt buffer raises ``FlatbufferError`` instead of reading past
the end. Not supported: structs, vectors of strings in unions, nested flatbuffers.
"""

from __future__ import annotations

import struct

import flatbuffers
import numpy as np
from flatbuffers import number_types as nt

from hwsim.tosa.schema import Field, Schema

SCALARS = {   # schema type -> (struct format, numpy type, flatbuffers type)
    "bool": ("B", np.bool_, nt.BoolFlags), "ubyte": ("B", np.uint8, nt.Uint8Flags),
    "uint8": ("B", np.uint8, nt.Uint8Flags), "int8": ("b", np.int8, nt.Int8Flags),
    "int16": ("h", np.int16, nt.Int16Flags), "uint16": ("H", np.uint16, nt.Uint16Flags),
    "int32": ("i", np.int32, nt.Int32Flags), "uint32": ("I", np.uint32, nt.Uint32Flags),
    "int64": ("q", np.int64, nt.Int64Flags), "uint64": ("Q", np.uint64, nt.Uint64Flags),
    "float": ("f", np.float32, nt.Float32Flags), "double": ("d", np.float64, nt.Float64Flags),
}
UNION = "Attribute"        # the one union of the TOSA schemas


class FlatbufferError(ValueError):
    """A read outside the buffer or a value the schema does not allow."""


class _Reader:
    def __init__(self, schema: Schema, buf: bytes):
        self.schema, self.buf = schema, buf

    def _u(self, fmt: str, pos: int) -> int:
        size = struct.calcsize(fmt)
        if pos < 0 or pos + size > len(self.buf):
            raise FlatbufferError(f"offset {pos} + {size} is outside the {len(self.buf)}-byte "
                                  "buffer")
        return struct.unpack_from("<" + fmt, self.buf, pos)[0]

    def _slot(self, table: int, slot: int) -> int:
        """Absolute position of a field's value, or 0 when absent."""
        vtable = table - self._u("i", table)
        vt_size = self._u("H", vtable)
        entry = 4 + 2 * slot
        if entry >= vt_size:
            return 0
        rel = self._u("H", vtable + entry)
        return table + rel if rel else 0

    def _ref(self, pos: int) -> int:
        return pos + self._u("I", pos)

    def table(self, name: str, pos: int) -> dict:
        if name not in self.schema.tables:
            raise FlatbufferError(f"the schema has no table {name}")
        out, slot = {}, 0
        for field in self.schema.tables[name]:
            if field.type == UNION:
                out[field.name] = self._union(pos, slot)
                slot += 2
                continue
            where = self._slot(pos, slot)
            out[field.name] = self._value(field, where)
            slot += 1
        return out

    def _union(self, table: int, slot: int):
        tag_pos = self._slot(table, slot)
        tag = self._u("B", tag_pos) if tag_pos else 0
        if tag == 0:
            return None
        if tag > len(self.schema.union):
            raise FlatbufferError(f"union tag {tag} is past the {len(self.schema.union)} "
                                  "members")
        member = self.schema.union[tag - 1]
        value_pos = self._slot(table, slot + 1)
        return member, (self.table(member, self._ref(value_pos)) if value_pos else {})

    def _value(self, field: Field, pos: int):
        kind = field.type
        if kind.startswith("["):
            return self._vector(kind[1:-1], pos) if pos else _empty(kind[1:-1], self.schema)
        if kind == "string":
            return self._string(self._ref(pos)) if pos else ""
        if kind in self.schema.tables:
            return self.table(kind, self._ref(pos)) if pos else None
        if kind in self.schema.enums:
            value = self._u("I", pos) if pos else 0
            members = self.schema.enums[kind]
            if value >= len(members) or not members[value]:
                raise FlatbufferError(f"{field.name} = {value} is not a {kind} value")
            return members[value]
        if not pos:
            return _default(field)
        value = self._u(SCALARS[kind][0], pos)
        return bool(value) if kind == "bool" else value

    def _string(self, pos: int) -> str:
        n = self._u("I", pos)
        if pos + 4 + n > len(self.buf):
            raise FlatbufferError(f"a {n}-byte string at {pos} runs past the buffer")
        try:
            return self.buf[pos + 4:pos + 4 + n].decode()
        except UnicodeDecodeError as exc:
            raise FlatbufferError(f"string at {pos} is not UTF-8: {exc.reason}") from None

    def _vector(self, elem: str, field_pos: int):
        pos = self._ref(field_pos)
        n = self._u("I", pos)
        start = pos + 4
        if elem == "string" or elem in self.schema.tables:
            if start + 4 * n > len(self.buf):      # a corrupt count: fail before looping
                raise FlatbufferError(f"a {n}-element [{elem}] vector at {pos} runs past the "
                                      "buffer")
            refs = [self._ref(start + 4 * i) for i in range(n)]
            if elem == "string":
                return [self._string(r) for r in refs]
            return [self.table(elem, r) for r in refs]
        np_type = np.dtype(SCALARS[elem][1])
        end = start + n * np_type.itemsize
        if end > len(self.buf):
            raise FlatbufferError(f"a {n}-element [{elem}] vector at {pos} runs past the "
                                  "buffer")
        raw = self.buf[start:end]
        return raw if elem == "ubyte" else np.frombuffer(raw, np_type.newbyteorder("<"))


def _empty(elem: str, schema: Schema):
    if elem == "ubyte":
        return b""
    if elem == "string" or elem in schema.tables:
        return []
    return np.zeros(0, SCALARS[elem][1])


def _default(field: Field):
    if field.type == "bool":
        return field.default == "true"
    if field.type in ("float", "double"):
        return float(field.default or 0)
    return int(field.default or 0)


def read_table(schema: Schema, buf: bytes, name: str) -> dict:
    """The root table of ``buf``, of type ``name``, as a dict."""
    reader = _Reader(schema, bytes(buf))
    try:
        return reader.table(name, reader._ref(0))
    except RecursionError:
        raise FlatbufferError("tables nest without end (corrupt offsets)") from None


def write_table(schema: Schema, name: str, values: dict, identifier: bytes = b"") -> bytes:
    """A finished flatbuffer whose root is the table ``name`` holding ``values``."""
    builder = flatbuffers.Builder(1024)
    root = _Writer(schema, builder).table(name, values)
    builder.Finish(root, file_identifier=identifier or None)
    return bytes(builder.Output())


class _Writer:
    def __init__(self, schema: Schema, builder: flatbuffers.Builder):
        self.schema, self.b = schema, builder

    def table(self, name: str, values: dict) -> int:
        fields = self.schema.tables[name]
        unknown = set(values) - {f.name for f in fields}
        if unknown:
            raise FlatbufferError(f"table {name} has no field {sorted(unknown)[0]}")
        refs, slots, slot = {}, {}, 0
        for field in fields:            # children first: a table is built in one go
            slots[field.name] = slot
            value = values.get(field.name)
            if field.type == UNION:
                slot += 2
                if value is not None:
                    refs[field.name] = self.table(value[0], value[1])
                continue
            slot += 1
            if value is not None and not self._inline(field):
                refs[field.name] = self._child(field, value)
        self.b.StartObject(slot)
        for field in fields:
            value, at = values.get(field.name), slots[field.name]
            if value is None:
                continue
            if field.type == UNION:
                self.b.PrependUint8Slot(at, self.schema.union.index(value[0]) + 1, 0)
                self.b.PrependUOffsetTRelativeSlot(at + 1, refs[field.name], 0)
            elif field.name in refs:
                self.b.PrependUOffsetTRelativeSlot(at, refs[field.name], 0)
            elif field.type in self.schema.enums:
                self.b.PrependUint32Slot(at, self.schema.enum_values[field.type][value], 0)
            else:
                flags = SCALARS[field.type][2]
                self.b.PrependSlot(flags, at, value, None)   # None: always written
        return self.b.EndObject()

    def _inline(self, field: Field) -> bool:
        return field.type in SCALARS or field.type in self.schema.enums

    def _child(self, field: Field, value) -> int:
        kind = field.type
        if kind == "string":
            return self.b.CreateString(value)
        if kind in self.schema.tables:
            return self.table(kind, value)
        elem = kind[1:-1]
        if elem == "string":
            return self._offsets([self.b.CreateString(v) for v in value])
        if elem in self.schema.tables:
            return self._offsets([self.table(elem, v) for v in value])
        if elem == "ubyte":          # TOSA aligns data vectors to 8 bytes (force_align: 8)
            raw = bytes(value)
            self.b.StartVector(1, len(raw), 8)
            self.b.head = self.b.Head() - len(raw)
            self.b.Bytes[self.b.Head():self.b.Head() + len(raw)] = raw
            return self.b.EndVector()
        return self.b.CreateNumpyVector(np.asarray(value, SCALARS[elem][1]).reshape(-1))

    def _offsets(self, refs: list[int]) -> int:
        self.b.StartVector(4, len(refs), 4)
        for ref in reversed(refs):
            self.b.PrependUOffsetTRelative(ref)
        return self.b.EndVector()
