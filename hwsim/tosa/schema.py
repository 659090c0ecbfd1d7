"""The TOSA flatbuffer schema as data: operator names, enums and attribute fields.

The schema shipped with tosa-tools (``bin/tosa.fbs``, the serialization library's TOSA 1.1
draft schema) is the one source for the attribute tables: which fields each operator's attribute
has, in which order, of which type. The ``.tosa`` reader, the writer and the graph IR derive their
attribute handling from it, so no attribute field is declared twice. This module also finds the
native tools tosa-tools installs next to it (``tosa-opt``, ``tosa_reference_model``).
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from dataclasses import dataclass
from pathlib import Path

from hwsim.errors import ConfigError


def tool(name: str) -> Path:
    """A file that tosa-tools installs under its ``bin/`` directory."""
    try:
        path = Path(importlib.metadata.distribution("tosa-tools").locate_file(f"bin/{name}"))
    except importlib.metadata.PackageNotFoundError:
        raise ConfigError("tosa-tools is not installed (pip install tosa-tools)") from None
    if not path.exists():
        raise ConfigError(f"tosa-tools has no bin/{name} at {path}")
    return path


@dataclass(frozen=True)
class Field:
    name: str      # schema spelling (snake_case)
    type: str      # "int32", "bool", "[int32]", "[ubyte]", "string", an enum, union or table
    default: str = ""   # the schema's default value, as written ("" when none is given)

    @property
    def method(self) -> str:
        """The generated flatbuffer accessor: local_bound -> LocalBound."""
        return "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(frozen=True)
class Schema:
    ops: tuple[str, ...]                      # Op enum names, by value
    enums: dict[str, tuple[str, ...]]         # enum name -> member names, by value
    enum_values: dict[str, dict[str, int]]    # enum name -> member -> value
    union: tuple[str, ...]                    # Attribute union members, index 1 upwards
    tables: dict[str, tuple[Field, ...]]      # attribute table -> fields in order

    def attribute_table(self, op: str) -> str:
        """The attribute table of an operator: CONV2D -> Conv2dAttribute."""
        return _attribute_table(self.union, op)

    def fields(self, op: str) -> tuple[Field, ...]:
        return self.tables[self.attribute_table(op)]


@functools.lru_cache(maxsize=None)
def _attribute_table(union: tuple, op: str) -> str:
    key = op.replace("_", "").lower()
    for table in union:
        if table[:-len("Attribute")].lower() == key:
            return table
    raise ConfigError(f"the TOSA schema has no attribute table for operator {op}")


def _enum(body: str) -> tuple[dict[str, int], tuple[str, ...]]:
    values, nxt = {}, 0
    for item in body.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, value = (part.strip() for part in item.partition("="))
        nxt = int(value) if value else nxt
        values[name], nxt = nxt, nxt + 1
    by_value = [""] * (max(values.values()) + 1)
    for name, value in values.items():
        by_value[value] = name
    return values, tuple(by_value)


@functools.lru_cache(maxsize=None)
def schema() -> Schema:
    """The 1.x schema that tosa-tools ships (``bin/tosa.fbs``)."""
    return parse_schema(tool("tosa.fbs").read_text())


def parse_schema(text: str) -> Schema:
    """A flatbuffer schema's enums, ``Attribute`` union and tables (fields in slot order)."""
    text = re.sub(r"//[^\n]*", "", text)
    enums, enum_values = {}, {}
    for name, body in re.findall(r"\benum\s+(\w+)\s*:\s*\w+\s*\{([^}]*)\}", text):
        enum_values[name], enums[name] = _enum(body)
    union_body = re.search(r"\bunion\s+Attribute\s*\{([^}]*)\}", text).group(1)
    union = tuple(m.strip() for m in union_body.split(",") if m.strip())
    tables = {}
    for name, body in re.findall(r"\btable\s+(\w+)\s*\{([^}]*)\}", text):
        tables[name] = tuple(Field(f, t, d) for f, t, d in
                             re.findall(r"(\w+)\s*:\s*(\[?\w+\]?)\s*(?:=\s*(-?\w+))?[^;]*;",
                                        body))
    return Schema(enums["Op"], enums, enum_values, union, tables)
