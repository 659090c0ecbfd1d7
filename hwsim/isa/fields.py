"""Bit-field words declared once, as data: one codec for every register word and encoding.

A ``Word`` is a table of named fields over an N-bit integer. A field covers one or more bit
ranges written MSB-first (``"10:7,1"`` is HMX's spatial mask: bits 10..7 hold the upper four bits
of the value and bit 1 the lowest). Constant bits (opcodes) and reserved bits (must be zero, or
must be all ones) are fields too. The table is checked when it is built: overlapping fields, bits
outside the word and bits that no field covers are errors. Encode, decode, validation (with the
field's name in the error) and text formatting all derive from the one table; this is the only
module in hwsim that shifts and masks instruction bits.
"""

from __future__ import annotations

from dataclasses import dataclass, field as dataclass_field
from typing import Callable, Iterable

import numpy as np

from hwsim.errors import EncodingError

Pieces = tuple[tuple[int, int], ...]


def parse_bits(spec: str) -> Pieces:
    """``"31:11"`` -> ((31, 11),); ``"10:7,1"`` -> ((10, 7), (1, 1)); MSB-first."""
    pieces = []
    for part in spec.replace(" ", "").split(","):
        hi, _, lo = part.partition(":")
        hi_bit = int(hi)
        lo_bit = int(lo) if lo else hi_bit
        if lo_bit > hi_bit:
            raise ValueError(f"bit range {part!r} is written low:high; write it high:low")
        pieces.append((hi_bit, lo_bit))
    return tuple(pieces)


@dataclass(frozen=True)
class Field:
    """A named value over some bits.

    ``signed``: two's complement over the field's width. ``in_place``: the value keeps its bit
    position (an address in bits 31:11 decodes to a multiple of 2048). ``allowed``: a predicate on
    the decoded value with ``expect`` describing it for error messages.
    """

    name: str
    bits: str
    signed: bool = False
    in_place: bool = False
    allowed: Callable[[int], bool] | None = None
    expect: str = ""
    doc: str = ""
    pieces: Pieces = dataclass_field(init=False)
    width: int = dataclass_field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "pieces", parse_bits(self.bits))
        object.__setattr__(self, "width", sum(hi - lo + 1 for hi, lo in self.pieces))
        if self.in_place and len(self.pieces) != 1:
            raise ValueError(f"field {self.name}: in_place needs one contiguous bit range")

    @property
    def shift(self) -> int:
        return self.pieces[-1][1] if self.in_place else 0

    def value_range(self) -> tuple[int, int]:
        lo, hi = (-(1 << (self.width - 1)), (1 << (self.width - 1)) - 1) if self.signed else (
            0, (1 << self.width) - 1)
        return lo << self.shift, hi << self.shift


@dataclass(frozen=True)
class Const:
    """Bits with a fixed value (an opcode). Decoding a word whose bits differ is an error."""

    bits: str
    value: int
    name: str = "opcode"


@dataclass(frozen=True)
class Reserved:
    """Bits that must be all zeros (``ones=False``) or all ones (``ones=True``)."""

    bits: str
    ones: bool = False
    name: str = "reserved"


def _extract(word: int, pieces: Pieces) -> int:
    value = 0
    for hi, lo in pieces:
        n = hi - lo + 1
        value = (value << n) | ((word >> lo) & ((1 << n) - 1))
    return value


def _insert(raw: int, pieces: Pieces) -> int:
    word = 0
    for hi, lo in reversed(pieces):
        n = hi - lo + 1
        word |= (raw & ((1 << n) - 1)) << lo
        raw >>= n
    return word


def _mask(pieces: Pieces) -> int:
    return _insert(-1, pieces)


def _simple(pieces: Pieces) -> tuple[int, int]:
    """(lowest bit, mask) of a field in one bit range; (0, 0) for one in several."""
    if len(pieces) != 1:
        return 0, 0
    hi, lo = pieces[0]
    return lo, (1 << (hi - lo + 1)) - 1


class Word:
    """An N-bit word made of fields, constants and reserved bits, checked when built."""

    def __init__(self, name: str, parts: Iterable[Field | Const | Reserved], width: int = 32,
                 complete: bool = True):
        self.name, self.width = name, width
        self.fields: dict[str, Field] = {}
        self.consts: list[tuple[Const, Pieces]] = []
        self.reserved: list[tuple[Reserved, Pieces]] = []
        covered = 0
        for part in parts:
            pieces = part.pieces if isinstance(part, Field) else parse_bits(part.bits)
            mask = _mask(pieces)
            label = f"{name}.{part.name}"
            if any(hi >= width for hi, _ in pieces):
                raise ValueError(f"{label}: bits {part.bits} fall outside a {width}-bit word")
            if covered & mask:
                raise ValueError(f"{label}: bits {part.bits} overlap another field")
            covered |= mask
            if isinstance(part, Field):
                if part.name in self.fields:
                    raise ValueError(f"{label}: declared twice")
                self.fields[part.name] = part
            elif isinstance(part, Const):
                if part.value >> sum(hi - lo + 1 for hi, lo in pieces):
                    raise ValueError(f"{label}: value {part.value:#x} does not fit bits "
                                     f"{part.bits}")
                self.consts.append((part, pieces))
            else:
                self.reserved.append((part, pieces))
        if complete and covered != (1 << width) - 1:
            missing = [b for b in range(width - 1, -1, -1) if not covered >> b & 1]
            raise ValueError(f"{name}: bits {missing} are not covered by any field")
        self.const_mask = sum(_mask(p) for _, p in self.consts)
        self.const_bits = sum(_insert(c.value, p) for c, p in self.consts)
        # what encode and decode do per field, derived once: a field in one bit range is a
        # shift and a mask (``_simple``), one in several goes through _extract/_insert
        self._decoders = [(f.name, *_simple(f.pieces), f.pieces, f.width, f.signed, f.shift)
                          for f in self.fields.values()]
        self._encoders = [(f.name, *f.value_range(), (1 << f.shift) - 1, f.shift,
                           *_simple(f.pieces), f.pieces, f) for f in self.fields.values()]
        self._allowed = [(f.name, f.allowed, f.expect) for f in self.fields.values()
                         if f.allowed is not None]
        # ``decode_array``'s table: a row per piece of every field (its lowest bit, its mask,
        # its place in the field's value), and the first row of each field
        rows = [(lo, (1 << (hi - lo + 1)) - 1, sum(top - low + 1 for top, low in f.pieces[k + 1:]))
                for f in self.fields.values() for k, (hi, lo) in enumerate(f.pieces)]
        lows, masks, places = (np.array(c, np.uint64).reshape(-1, 1) for c in zip(*rows)) \
            if rows else (np.zeros((0, 1), np.uint64),) * 3
        firsts = np.cumsum([0] + [len(f.pieces) for f in self.fields.values()])[:-1]
        self._pieces = lows, masks, places, firsts
        self._fixed_bits = self.const_bits | sum(_mask(p) for r, p in self.reserved if r.ones)
        self._fixed_mask = self.const_mask | sum(_mask(p) for _, p in self.reserved)

    def matches(self, word: int) -> bool:
        """True when the constant (opcode) bits of ``word`` are this word's."""
        return word & self.const_mask == self.const_bits

    def decode(self, word: int, check: bool = True) -> dict[str, int]:
        """Field values of ``word``; with ``check``, reserved, constant and allowed-value rules."""
        if not 0 <= word < (1 << self.width):
            raise EncodingError(self.name, "word", word, f"a {self.width}-bit unsigned value")
        if check and word & self._fixed_mask != self._fixed_bits:
            self._fixed_error(word)
        values = {}
        for name, lo, mask, pieces, width, signed, shift in self._decoders:
            raw = (word >> lo) & mask if mask else _extract(word, pieces)
            if signed and raw >> (width - 1):
                raw -= 1 << width
            values[name] = raw << shift
        if check:
            self.validate(values)
        return values

    def _fixed_error(self, word: int) -> None:
        """The error of the first constant or reserved range of ``word`` that is not as
        required."""
        for const, pieces in self.consts:
            if _extract(word, pieces) != const.value:
                raise EncodingError(self.name, f"{const.name}[{const.bits}]",
                                    _extract(word, pieces), f"{const.value:#x}")
        for res, pieces in self.reserved:
            raw = _extract(word, pieces)
            want = _mask(((sum(hi - lo + 1 for hi, lo in pieces) - 1, 0),)) if res.ones else 0
            if raw != want:
                expected = "all ones" if res.ones else "zero"
                raise EncodingError(self.name, f"{res.name}[{res.bits}]", raw, expected)

    def validate(self, values: dict[str, int]) -> None:
        for name, allowed, expect in self._allowed:
            if name in values and not allowed(values[name]):
                raise EncodingError(self.name, name, values[name], expect or "an allowed value")

    def encode(self, **values: int) -> int:
        """The word with these field values; unnamed fields are zero, reserved bits as required."""
        if not values.keys() <= self.fields.keys():
            unknown = sorted(set(values) - set(self.fields))
            raise EncodingError(self.name, unknown[0], values[unknown[0]],
                                f"one of {', '.join(self.fields)}")
        word = self._fixed_bits
        for name, lo, hi, align, shift, bit, mask, pieces, f in self._encoders:
            value = int(values.get(name, 0))
            if not lo <= value <= hi or value & align:
                step = f", a multiple of {1 << shift}" if shift else ""
                raise EncodingError(self.name, name, value, f"{lo}..{hi}{step}")
            if f.allowed is not None and name in values and not f.allowed(value):
                raise EncodingError(self.name, name, value, f.expect or "an allowed value")
            word |= ((value >> shift) & mask) << bit if mask else _insert(value >> shift, pieces)
        return word

    def fields_of(self, values: dict[str, int]) -> dict[str, int]:
        """What ``decode(encode(**values))`` gives, without the round trip: every field (unnamed
        ones zero), each checked as ``encode`` and ``decode`` check it (a failure raises their
        error)."""
        if not values.keys() <= self.fields.keys():
            self.encode(**values)  # raises the unknown field's error
        out = {}
        for name, lo, hi, align, _, _, _, _, _ in self._encoders:
            value = int(values.get(name, 0))
            if not lo <= value <= hi or value & align:
                self.encode(**values)  # raises the field's error
            out[name] = value
        self.validate(out)
        return out

    def decode_array(self, words) -> dict[str, np.ndarray]:
        """Field values of an array of words (uint64-sized or narrower), without checks: the
        vectorised decode for register files loaded as raw words, every piece of every field
        in one pass (a bias set is decoded at each convert that loads a new one)."""
        words = np.asarray(words).astype(np.uint64)
        if not self.fields:
            return {}
        lows, masks, places, firsts = self._pieces
        pieces = ((words.reshape(1, -1) >> lows) & masks) << places
        raw = np.bitwise_or.reduceat(pieces, firsts, axis=0).astype(np.int64)
        values = {}
        for (name, _, _, _, width, signed, shift), value in zip(self._decoders, raw):
            value = value.reshape(words.shape)
            if signed:
                value = np.where(value >> (width - 1) & 1, value - (1 << width), value)
            values[name] = value << shift if shift else value
        return values

    def encode_array(self, **values) -> np.ndarray:
        """Words (uint64) from field values, arrays or numbers broadcast together; each value is
        range-checked. The numbers are encoded once (``encode``), the arrays with numpy."""
        numbers = {name: v for name, v in values.items() if np.ndim(v) == 0}
        words = np.uint64(self.encode(**numbers))
        for name, array in values.items():
            if name in numbers:
                continue
            f = self.fields.get(name)
            if f is None:
                self.encode(**{name: 0})  # raises the unknown-field error
            value = np.asarray(array, dtype=np.int64)
            lo, hi = f.value_range()
            if value.size and (value.min() < lo or value.max() > hi or f.shift and np.any(
                    value & ((1 << f.shift) - 1))):
                bad = (value < lo) | (value > hi) | (value & ((1 << f.shift) - 1) != 0)
                self.encode(**{name: int(value[bad].flat[0])})  # raises with the field's name
            raw = (value >> f.shift).astype(np.uint64)     # two's complement if signed
            for hi_bit, lo_bit in reversed(f.pieces):
                n = hi_bit - lo_bit + 1
                words = words | (raw & np.uint64((1 << n) - 1)) << np.uint64(lo_bit)
                raw = raw >> np.uint64(n)
        return np.asarray(words)

    def format(self, values: dict[str, int]) -> str:
        return " ".join(f"{k}={v:#x}" if abs(v) > 9 else f"{k}={v}" for k, v in values.items())

    def describe(self) -> list[tuple[str, str, str]]:
        """(bits, name, doc) rows, most significant first, for documentation."""
        rows = [(f.bits, f.name, f.doc) for f in self.fields.values()]
        rows += [(c.bits, c.name, f"= {c.value:#x}") for c, _ in self.consts]
        rows += [(r.bits, r.name, "all ones" if r.ones else "zero") for r, _ in self.reserved]
        return sorted(rows, key=lambda r: -parse_bits(r[0])[0][0])
