"""Machine parameters declared once, as data: name, default, unit, source, valid values.

One table per machine feeds the defaults, overrides from a TOML file, a trace's ``.param`` lines
and the command line, validation (``ConfigError`` on an unknown name or a bad value) and the
``hwsim targets`` listing. Every row carries its source: a manual section, a published figure
(docs/sources.md), another model, or ``assumption: why``. Its type is its default's type; a
number declares its valid ``Range`` (with the reason for its limits) or its ``choices``, a string
its ``choices``. Sweeps feed values by the thousand, so the limits keep every value the machines
can take physical: rates and widths strictly positive, counts at least one where zero means
nothing, and maxima low enough that no cost reaches an absurd number of cycles. A ``ParamSet``
remembers which names were read so that the tests can fail on a parameter nobody uses.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from hwsim.errors import ConfigError, clip

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

_SIZE_SUFFIX = {"": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
                "g": 1 << 30, "gib": 1 << 30}


def _number(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e6:
        return f"{int(value):,}"
    return f"{value:g}"


@dataclass(frozen=True)
class Range:
    """The valid values of a number, ``low`` to ``high`` inclusive, and why those are the
    limits (shown with the error when a value falls outside)."""

    low: float
    high: float
    why: str
    hex: bool = False

    def __post_init__(self):
        if not self.low <= self.high or not self.why.strip():
            raise ValueError(f"range {self.low}..{self.high} needs low <= high and a reason")

    def __str__(self) -> str:
        if self.hex:
            return f"{self.low:#x}..{self.high:#x}"
        return f"{_number(self.low)}..{_number(self.high)}"


# Limits shared by the machines' tables.
CLOCK = Range(1e6, 1e11, "1 MHz to 100 GHz, far either side of any of these parts")
LATENCY = Range(0, 10_000, "0 (none) to 10,000 cycles, ten times a DRAM access")
COST = Range(0, 10_000, "a fixed cost: 0 (free) to 10,000 cycles")
OCCUPANCY = Range(1, 10_000, "an operation holds its unit at least one cycle; at most 10,000")
BANDWIDTH = Range(0.01, 65536, "bytes per cycle: positive; 64 KB per cycle is beyond any port")
PORT_WIDTH = Range(1, 65536, "whole bytes per cycle: at least one; 64 KB is beyond any port")
QUEUE = Range(1, 256, "at least one entry; 256 is far beyond any hardware queue")
ADDRESS = Range(0, 0xFFFF_F000, "a 32-bit address", hex=True)


@dataclass(frozen=True)
class Param:
    """One row of a parameter table.

    ``kind`` is ``"timing"`` (costs, rates, latencies, the clock) or ``"arch"`` (sizes and modes
    that shape architectural state or numerics). The default's type is the parameter's type
    (bool, int, float or str). ``choices`` restricts the value to a set; ``valid`` bounds a
    number. Every number has one of them, every string its choices.
    """

    name: str
    default: Any
    unit: str
    source: str
    doc: str = ""
    kind: str = "timing"
    choices: tuple | None = None
    valid: Range | None = None

    def __post_init__(self):
        if not self.source.strip():
            raise ValueError(f"parameter {self.name} has no source")
        if self.kind not in ("timing", "arch"):
            raise ValueError(f"parameter {self.name}: kind must be timing or arch")
        kind = type(self.default)
        if kind is not bool and self.choices is None and (kind is str or self.valid is None):
            raise ValueError(f"parameter {self.name} declares no valid range or choices")
        self.convert(self.default, "default")

    def limits(self) -> str:
        """The valid values as text: ``low..high``, the choices, or ``true/false``."""
        if self.choices is not None:
            return "|".join(map(str, self.choices))
        return str(self.valid) if self.valid is not None else "true|false"

    def convert(self, value: Any, origin: str) -> Any:
        """``value`` (a string from text, or a Python value) as this parameter's type, checked."""
        kind = type(self.default)
        try:
            value = _CONVERT[kind](value)
        except (ValueError, TypeError, OverflowError):
            raise self._error(origin, value, f"expected {kind.__name__}") from None
        if kind is float and not math.isfinite(value):
            raise self._error(origin, value, f"expected a finite number in {self.limits()}")
        if self.choices is not None and value not in self.choices:
            raise self._error(origin, value, f"expected one of {', '.join(map(str, self.choices))}")
        if self.valid is not None and not self.valid.low <= value <= self.valid.high:
            unit = f" {self.unit}" if self.unit else ""
            raise self._error(origin, value, f"expected {self.valid}{unit} ({self.valid.why})")
        return value

    def _error(self, origin: str, value: Any, expected: str) -> ConfigError:
        return ConfigError(f"{origin}: parameter {self.name} = {clip(repr(value), 60)}: "
                           f"{expected}")


def _to_bool(value: Any) -> bool:
    if isinstance(value, str):
        if value.lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
            raise ValueError
        return value.lower() in ("true", "1", "yes", "on")
    if not isinstance(value, (bool, int)) or value not in (0, 1):
        raise ValueError
    return bool(value)


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError
    return float(value)


def _parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError
        return int(value)
    match = re.fullmatch(r"\s*([-+]?(?:0x[0-9a-f_]+|[0-9_]+))\s*([kmg](?:ib)?)?\s*", str(value), re.I)
    if not match:
        raise ValueError
    return int(match.group(1), 0) * _SIZE_SUFFIX[(match.group(2) or "").lower()]


_CONVERT = {bool: _to_bool, int: _parse_int, float: _to_float, str: str}


class ParamTable:
    """The declared rows of one machine, in order, with unique names."""

    def __init__(self, rows: Iterable[Param]):
        self.rows: dict[str, Param] = {}
        for row in rows:
            if row.name in self.rows:
                raise ValueError(f"parameter {row.name} declared twice")
            self.rows[row.name] = row

    def __iter__(self):
        return iter(self.rows.values())

    def defaults(self) -> "ParamSet":
        return ParamSet(self)

    def split(self, overrides: dict, origin: str = "command line") -> tuple[dict, dict]:
        """(architectural, timing) overrides, each checked against its row: a machine is
        built with the first, a run takes the second."""
        self.defaults().update(overrides, origin)
        arch = {k: v for k, v in overrides.items() if self.rows[k].kind == "arch"}
        return arch, {k: v for k, v in overrides.items() if k not in arch}


class ParamSet:
    """Current values of a machine's parameters. Attribute access reads a value."""

    def __init__(self, table: ParamTable):
        object.__setattr__(self, "_table", table)
        object.__setattr__(self, "_values", {n: r.default for n, r in table.rows.items()})
        object.__setattr__(self, "_read", set())
        object.__setattr__(self, "_origin", {n: "default" for n in table.rows})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):     # not a parameter (copy and pickle look these up)
            raise AttributeError(name)
        try:
            value = self._values[name]
        except KeyError:
            raise AttributeError(name) from None
        self._read.add(name)
        return value

    def __setattr__(self, name, value):
        raise AttributeError("parameters are set with ParamSet.set()")

    def set(self, name: str, value: Any, origin: str = "argument") -> None:
        row = self._table.rows.get(name)
        if row is None:
            close = [n for n in self._table.rows if name.split(".")[-1] in n]
            hint = f" (did you mean {', '.join(close[:3])}?)" if close else ""
            raise ConfigError(f"{origin}: unknown parameter {name!r}{hint}; "
                              "'hwsim targets' lists them")
        self._values[name] = row.convert(value, origin)
        self._origin[name] = origin

    def update(self, values: dict[str, Any], origin: str = "argument") -> None:
        for name, value in values.items():
            self.set(name, value, origin)

    def load_toml(self, path: str | Path) -> None:
        self.update(read_toml(path), origin=str(path))

    def copy(self) -> "ParamSet":
        """Independent values; reads are still recorded on this set (a run's copy counts)."""
        other = ParamSet(self._table)
        other._values.update(self._values)
        other._origin.update(self._origin)
        object.__setattr__(other, "_read", self._read)
        return other

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def rows(self) -> list[tuple[Param, Any, str]]:
        """(declaration, current value, where the value came from) for each parameter."""
        return [(r, self._values[n], self._origin[n]) for n, r in self._table.rows.items()]

    def unread(self) -> list[str]:
        return [n for n in self._table.rows if n not in self._read]


def read_toml(path: str | Path) -> dict[str, Any]:
    """A TOML parameter file as ``{name: value}``: top-level pairs, tables flattened with '.'."""
    try:
        with open(path, "rb") as fh:
            return _flatten(tomllib.load(fh))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read parameter file: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (at byte offset {exc.start}): TOML files "
                          "are UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def _flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def parse_assignment(text: str, origin: str = "--param") -> tuple[str, str]:
    """``"KEY=VALUE"`` -> (key, value) with a clear error otherwise."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"{origin} {text!r}: expected KEY=VALUE")
    return key.strip(), value.strip()
