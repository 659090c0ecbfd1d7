"""Arm SME (and the SVE/A64 instructions around it): encodings, assembly and disassembly.

Every supported instruction is one row of ``FORMS``: its assembly template (as GNU as and LLVM
print it) and its encoding, declared once as a ``hwsim.isa.fields.Word`` built from an ARM-ARM
style bit diagram (constant bits and named fields, most significant first). The assembler, the
disassembler, validation and the error messages all derive from those rows:

* ``assemble(text) -> int`` and ``disassemble(word) -> str`` round-trip for every row;
* ``parse_line`` / ``assemble_program`` turn trace lines into ``Instruction`` objects, accept
  ``.inst 0xWORD`` for any supported encoding, and expand the ``mov Xd, #imm`` pseudo-instruction
  (below);
* a bad line raises ``TraceSyntaxError`` naming file:line:column, what was expected and found.

Template notation: ``<field>`` is a decimal number (a register index), ``<field:kind>`` uses one of
``KINDS`` (``#`` immediates, X/W registers with SP or ZR for 31, slice-index registers W12-W15,
...), ``<f1,f2:kind>`` spans fields (the ``mov`` immediate aliases), ``(...)`` is optional: parsing
accepts it absent (its fields then take their defaults, ``<f=31>``), printing omits it when every
field in it has its default (a group without fields is always printed).

``mov Xd|Wd, #imm`` with any 64-bit (32-bit) value: a value one MOVZ or one MOVN holds assembles to
that instruction, as LLVM does; any other value is a pseudo-instruction that ``parse_line``
expands into MOVZ (or MOVN) followed by MOVKs, the shortest such sequence. (LLVM would use ORR for
bitmask immediates and reject the rest; GNU as rejects them.) ``assemble`` takes one instruction
and raises for such a value.

Sources: Arm ARM DDI0487 (instruction encodings, aliases); encodings checked against LLVM's MC
tests (``llvm/test/MC/AArch64/{SME,SME2p1,SVE}``, see tests/test_sme_isa.py); the printing of the
MOV and ZERO aliases follows LLVM's AArch64InstPrinter. Not modelled: every other instruction,
including branches (a trace is straight-line code), NZCV, and SVE instructions outside this list.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field as dataclass_field
from typing import Callable

import numpy as np

from hwsim.errors import EncodingError, HwsimError, Location, TraceSyntaxError
from hwsim.isa.fields import Const, Field, Word
from hwsim.traces.reader import unknown_directive

# -- operand kinds ------------------------------------------------------------------------------


def _number(text: str) -> int:
    return int(text.lstrip("#").replace("_", ""), 0)


def _register(prefix: str, special: str):
    def parse(text):
        if text == special:
            return 31
        digits = text[len(prefix):]
        if not (text.startswith(prefix) and digits.isdigit() and int(digits) <= 30):
            raise ValueError
        return int(digits)
    return parse


def _choice(names: str):
    def parse(text):
        return names.index(text)
    return parse


def _slice_register(text):
    if not 12 <= int(text) <= 15:
        raise ValueError
    return int(text) - 12


# PTRUE patterns by encoding (Arm ARM DecodePredCount); others print as #N and count zero
PATTERNS = {0: "pow2", 29: "mul4", 30: "mul3", 31: "all",
             **{n: f"vl{n}" for n in range(1, 9)},
             **{9 + i: f"vl{16 << i}" for i in range(5)}}
_PATTERN_CODES = {name: code for code, name in PATTERNS.items()}


def _pattern(text):
    return _number(text) if text.startswith("#") else _PATTERN_CODES[text]


def _lsl(step: int):
    def parse(text):
        value = _number(text)
        if value % step:
            raise ValueError
        return value // step
    return parse


_TILE = re.compile(r"za(\d*)(?:\.([bhsd]))?$")
_TILE_MASK = {"b": (0xFF,), "h": (0x55, 0xAA), "s": (0x11, 0x22, 0x44, 0x88),
              "d": tuple(1 << i for i in range(8))}


def _zero_mask(text):
    """``za``, ``za0.b``, ``za1.h``, ``za2.s``, ``za7.d``, comma-separated -> the .D tile mask."""
    mask = 0
    for item in filter(None, (t.strip() for t in text.split(","))):
        m = _TILE.match(item)
        if not m or (m.group(1) == "") != (m.group(2) is None):
            raise ValueError
        masks = _TILE_MASK[m.group(2)] if m.group(2) else (0xFF,)
        mask |= masks[int(m.group(1) or 0)]
    return mask


def _zero_text(mask: int) -> str:
    """LLVM's printing: ``za`` for all, .H/.S names when the mask is whole .S tiles, else .D."""
    if mask == 0xFF:
        return "za"
    low = mask & 0xF
    if mask >> 4 == low and low:
        if low in (0x5, 0xA):
            return f"za{low >> 1 & 1}.h"
        return ",".join(f"za{i}.s" for i in range(4) if low >> i & 1)
    return ", ".join(f"za{i}.d" for i in range(8) if mask >> i & 1)


@dataclass(frozen=True)
class Kind:
    """How an operand looks: its regex, text -> value (ValueError if not), value -> text."""

    regex: str
    parse: Callable
    render: Callable
    expect: str


_NUM = r"#?[-+]?(?:0x[0-9a-f_]+|0b[01_]+|[0-9_]+)"
KINDS = {
    "u": Kind(r"\d+", int, str, "a number"),
    "imm": Kind(_NUM, _number, lambda v: f"#{v}", "an immediate #N"),
    "xsp": Kind(r"\w+", _register("x", "sp"), lambda v: "sp" if v == 31 else f"x{v}",
                "a register x0-x30 or sp"),
    "xzr": Kind(r"\w+", _register("x", "xzr"), lambda v: "xzr" if v == 31 else f"x{v}",
                "a register x0-x30 or xzr"),
    "wsp": Kind(r"\w+", _register("w", "wsp"), lambda v: "wsp" if v == 31 else f"w{v}",
                "a register w0-w30 or wsp"),
    "wzr": Kind(r"\w+", _register("w", "wzr"), lambda v: "wzr" if v == 31 else f"w{v}",
                "a register w0-w30 or wzr"),
    "wv": Kind(r"\d+", _slice_register, lambda v: str(v + 12), "a slice index register w12-w15"),
    "hv": Kind(r"[hv]", _choice("hv"), "hv".__getitem__, "h or v"),
    "esz": Kind(r"[bhsd]", _choice("bhsd"), "bhsd".__getitem__, "an element size b, h, s or d"),
    "pattern": Kind(r"#?\w+", _pattern, lambda v: PATTERNS.get(v, f"#{v}"),
                    "a pattern (pow2, vl1-vl256, mul4, mul3, all or #N)"),
    "lsl12": Kind(r"lsl\s*#?\s*\d+", lambda t: {"0": 0, "12": 1}[re.split(r"[\s#]+", t)[-1]],
                  lambda v: "lsl #12", "lsl #12"),
    "hw16": Kind(r"\d+", _lsl(16), lambda v: str(16 * v), "a shift of 0, 16, 32 or 48"),
    "zamask": Kind(r"[^}]*", _zero_mask, _zero_text, "a list of ZA tiles (za, za0.h, za1.s, ...)"),
}


def _mov_value(text: str, bits: int) -> int:
    """A ``mov`` immediate as an unsigned ``bits``-wide value (negative values wrap)."""
    value = _number(text)
    if not -(1 << (bits - 1)) <= value < 1 << bits:
        raise ValueError
    return value & ((1 << bits) - 1)


def _movz_fields(value: int, bits: int) -> dict[str, int]:
    for hw in range(bits // 16):
        if value & ~(0xFFFF << 16 * hw) == 0:
            return {"imm16": value >> 16 * hw, "hw": hw}
    raise ValueError


def _mov_kind(bits: int, invert: bool) -> Kind:
    mask = (1 << bits) - 1

    def parse(text):
        value = _mov_value(text, bits)
        return _movz_fields(~value & mask if invert else value, bits)

    def render(v):
        value = v["imm16"] << 16 * v["hw"]
        value = ~value & mask if invert else value
        return f"#{value - (1 << bits) if value >> (bits - 1) else value}"
    return Kind(_NUM, parse, render, f"an immediate one {'MOVN' if invert else 'MOVZ'} holds")


for _bits in (32, 64):
    KINDS[f"movz{_bits}"] = _mov_kind(_bits, False)
    KINDS[f"movn{_bits}"] = _mov_kind(_bits, True)


# -- templates ---------------------------------------------------------------------------------

_PIECE = re.compile(r"<([\w,]+)(?::(\w+))?(?:=(\d+))?>|[()]|[a-z0-9#]+|\s+|[^\sa-z0-9#<()]")


class _NoMatch(Exception):
    """A template that does not match: where (0-based column), what it wanted there, what it
    found (if known), and whether the line had the template's shape (only a value was wrong)."""

    def __init__(self, column: int, expected: str, found: str | None = None,
                 shaped: bool = False):
        super().__init__(expected)
        self.column, self.expected, self.found, self.shaped = column, expected, found, shaped


@dataclass
class _Slot:
    names: tuple[str, ...]
    kind: Kind
    default: int
    group: int  # the optional group it sits in, or -1


class Template:
    """An assembly template compiled to a regex (parsing) and a list of pieces (printing)."""

    def __init__(self, text: str):
        self.text = text
        self.mnemonic = text.split()[0]
        self.slots: list[_Slot] = []
        self.pieces: list = []                  # str, _Slot, or ("(" | ")", group)
        self.steps: list[tuple[str, int, str]] = []  # (regex before a token, open groups, token)
        regex, group, groups, prev_word, gap = "", -1, 0, False, False
        for m in _PIECE.finditer(text):
            token = m.group(0)
            if token.isspace():
                self.pieces.append(" ")
                gap = True
            elif token in "()":
                if token == "(":
                    group, groups = groups, groups + 1
                self.pieces.append((token, group))
                regex += "(?:" if token == "(" else ")?"
                group = group if token == "(" else -1
            else:
                word = token[0].isalnum() or token[0] in "#<"
                sep = (r"\s+" if gap else "") if word and prev_word else r"\s*"
                expect = repr(token)
                if m.group(1):
                    slot = _Slot(tuple(m.group(1).split(",")), KINDS[m.group(2) or "u"],
                                 int(m.group(3) or 0), group)
                    expect = slot.kind.expect
                    token = f"(?P<s{len(self.slots)}>{slot.kind.regex})"
                    self.slots.append(slot)
                    self.pieces.append(slot)
                else:
                    self.pieces.append(token)
                    token = re.escape(token)
                self.steps.append((regex, int(group >= 0), expect))
                regex += sep + token
                prev_word, gap = word, False
        self.steps.append((regex, 0, "end of line"))
        self.regex = re.compile(regex + r"\s*$")
        self.kinds: dict[str, object] = {}      # field name -> the kind of its first slot
        for slot in self.slots:
            for name in slot.names:
                self.kinds.setdefault(name, slot.kind)

    def render(self, values: dict[str, int]) -> str:
        out, skip = [], None
        for piece in self.pieces:
            if isinstance(piece, tuple):
                opening, group = piece
                slots = [s for s in self.slots if s.group == group]
                if opening == "(" and slots and all(
                        values[n] == s.default for s in slots for n in s.names):
                    skip = group
                elif opening == ")" and skip == group:
                    skip = None
            elif skip is None:
                if isinstance(piece, _Slot):
                    names = piece.names
                    out.append(piece.kind.render({n: values[n] for n in names} if len(names) > 1
                                                 else values[names[0]]))
                else:
                    out.append(piece)
        return "".join(out)

    def match(self, text: str) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
        """(field values, span of each field's text); ``_NoMatch`` if the text does not fit."""
        m = self.regex.match(text)
        if m is None:
            raise _NoMatch(*self._failure(text))
        values: dict[str, int] = {}
        spans: dict[str, tuple[int, int]] = {}
        for i, slot in enumerate(self.slots):
            found, span = m.group(f"s{i}"), m.span(f"s{i}")
            if found is None:
                parsed = {n: slot.default for n in slot.names}
            else:
                try:
                    value = slot.kind.parse(found.strip())
                except (ValueError, KeyError, IndexError):
                    raise _NoMatch(span[0], slot.kind.expect, found.strip(), True) from None
                parsed = value if isinstance(value, dict) else {slot.names[0]: value}
            for name, value in parsed.items():
                if values.setdefault(name, value) != value:
                    where = span[0] if found is not None else len(text.rstrip())
                    raise _NoMatch(where, f"{values[name]} (as before)", found, True)
                if found is not None:
                    spans.setdefault(name, span)
        return values, spans

    def _failure(self, text: str) -> tuple[int, str]:
        """Where the longest matching prefix ends and what the template wanted next."""
        column, expected = 0, self.steps[0][2]
        for regex, open_group, expect in self.steps[1:]:
            m = _prefix(regex + ")?" * open_group).match(text)
            if m is None:
                break
            column = m.end() + len(text[m.end():]) - len(text[m.end():].lstrip())
            expected = expect
        return column, expected


@functools.lru_cache(maxsize=None)
def _prefix(regex: str):
    return re.compile(regex)


# -- encodings -------------------------------------------------------------------------------


def _word(name: str, diagram: str, allowed: dict | None = None) -> Word:
    """A Word from an ARM-ARM style diagram, MSB first: runs of 0/1 are constant bits, ``f:N`` a
    field of N bits (``f:N:s`` signed). ``allowed`` maps a field to (predicate, description)."""
    parts, bit = [], 32
    for token in diagram.split():
        if set(token) <= {"0", "1"}:
            hi, bit = bit - 1, bit - len(token)
            if parts and isinstance(parts[-1], Const):  # merge with the previous constant run
                prev = parts.pop()
                hi, token = int(prev.bits.split(":")[0]), format(prev.value, "b").zfill(
                    int(prev.bits.split(":")[0]) - int(prev.bits.split(":")[-1]) + 1) + token
            parts.append(Const(f"{hi}:{bit}", int(token, 2)))
        else:
            fname, width, *sign = token.split(":")
            hi, bit = bit - 1, bit - int(width)
            rule = (allowed or {}).get(fname, (None, ""))
            parts.append(Field(fname, f"{hi}:{bit}", signed=bool(sign), allowed=rule[0],
                               expect=rule[1]))
    if bit:
        raise ValueError(f"{name}: diagram covers {32 - bit} bits, not 32")
    return Word(name, parts)


@dataclass(frozen=True)
class Form:
    """One supported encoding (or an alias of one): template, Word, and what it means.

    ``op`` and ``attrs`` tell the machine what the instruction does; ``fixed`` are field values an
    alias implies; ``when`` says when the alias applies (printing and parsing) and ``why`` what it
    needs; ``prints`` is False for accepted spellings that are never printed (``mova``).
    """

    name: str
    template: Template
    word: Word
    op: str
    attrs: dict = dataclass_field(default_factory=dict)
    fixed: dict = dataclass_field(default_factory=dict)
    when: Callable | None = None
    why: str = ""
    prints: bool = True

    @property
    def mnemonic(self) -> str:
        return self.template.mnemonic

    def parse(self, text: str) -> dict[str, int]:
        values, spans = self.template.match(text)
        values.update(self.fixed)
        for name, value in values.items():
            f = self.word.fields[name]
            lo, hi = f.value_range()
            if not lo <= value <= hi or (f.allowed is not None and not f.allowed(value)):
                start, end = spans.get(name, (0, len(text)))
                raise _NoMatch(start, f.expect or f"{name} in {lo}..{hi}", text[start:end], True)
        if self.when is not None and not self.when(values):
            start = len(self.mnemonic) + 1
            raise _NoMatch(start, self.why, text[start:].strip(), True)
        return values

    def text(self, values: dict[str, int]) -> str:
        return self.template.render(values)


FORMS: list[Form] = []


def _form(name, template, diagram, op, allowed=None, *, fixed=None, when=None, why="",
          prints=True, **attrs):
    FORMS.append(Form(name, Template(template), _word(name, diagram, allowed), op, attrs,
                      fixed or {}, when, why, prints))


_SIZES = "bhsd"
_MEM = {"b": "b", "h": "h", "s": "w", "d": "d"}  # ld1b/ld1h/ld1w/ld1d for .b/.h/.s/.d
_SLICE = {"b": "off:4", "h": "zat:1 off:3", "s": "zat:2 off:2", "d": "zat:3 off:1"}
_NOT_ZR = {"rm": (lambda v: v != 31, "x0-x30 (xzr is unallocated here)")}
_HW32 = {"hw": (lambda v: v < 2, "a shift of 0 or 16 for a W register")}


def _outer_products():
    fp = (("fmop", "s", "s", "1000 0000 100", "00 zada:2", "fp32"),
          ("fmop", "s", "h", "1000 0001 101", "00 zada:2", "fp16_wide"),
          ("bfmop", "s", "h", "1000 0001 100", "00 zada:2", "bf16_wide"),
          ("bfmop", "h", "h", "1000 0001 101", "100 zada:1", "bf16"))
    for stem, tile, src, head, tail, dtype in fp:
        for s, suffix in enumerate("as"):
            _form(f"{stem}{suffix}_{tile}{src}", f"{stem}{suffix} za<zada>.{tile}, p<pn>/m, "
                  f"p<pm>/m, z<zn>.{src}, z<zm>.{src}",
                  f"{head} zm:5 pm:3 pn:3 zn:5 {s} {tail}", "mopa", dtype=dtype, neg=bool(s))
    for stem, un, um in (("smop", 0, 0), ("sumop", 0, 1), ("usmop", 1, 0), ("umop", 1, 1)):
        for s, suffix in enumerate("as"):
            _form(f"{stem}{suffix}", f"{stem}{suffix} za<zada>.s, p<pn>/m, p<pm>/m, z<zn>.b, "
                  f"z<zm>.b", f"1010 000{un} 10{um} zm:5 pm:3 pn:3 zn:5 {s} 00 zada:2", "mopa",
                  dtype="int8", neg=bool(s), unsigned=(bool(un), bool(um)))


def _za_data():
    for i, sz in enumerate(_SIZES):
        size, tile = format(i, "02b"), "0" if sz == "b" else "<zat>"
        lsl = f", lsl #{i}" if i else ""
        zat = {"zat": 0} if sz == "b" else {}
        slice_ = f"za{tile}<v:hv>.{sz}[w<rs:wv>, <off>]"
        for load in (True, False):
            mn = ("ld1" if load else "st1") + _MEM[sz]
            _form(f"{mn}_za", f"{mn} ({{){slice_}(}}), p<pg>{'/z' if load else ''}, "
                  f"[<rn:xsp>(, <rm:xzr=31>{lsl})]",
                  f"1110 0000 {size} {int(not load)} rm:5 v:1 rs:2 pg:3 rn:5 0 {_SLICE[sz]}",
                  "ld1_za" if load else "st1_za", esize=1 << i, tile=zat)
        for mn, prints in (("mov", True), ("mova", False)):
            _form(f"{mn}_z_za{sz}", f"{mn} z<zd>.{sz}, p<pg>/m, {slice_}",
                  f"1100 0000 {size} 0000 1 0 v:1 rs:2 pg:3 0 {_SLICE[sz]} zd:5", "mova_tv",
                  esize=1 << i, prints=prints, tile=zat)
            _form(f"{mn}_za_z{sz}", f"{mn} {slice_}, p<pg>/m, z<zn>.{sz}",
                  f"1100 0000 {size} 0000 0 0 v:1 rs:2 pg:3 zn:5 0 {_SLICE[sz]}", "mova_vt",
                  esize=1 << i, prints=prints, tile=zat)
    for load, mn in ((True, "ldr"), (False, "str")):
        _form(mn, f"{mn} za[w<rv:wv>, <off>], [<rn:xsp>(, #<off>, mul vl)]",
              f"1110 0001 00 {int(not load)} 0 0000 0 rv:2 000 rn:5 0 off:4",
              "ldr_za" if load else "str_za")
    _form("zero", "zero {<mask:zamask>}", "1100 0000 0000 1000 0000 0000 mask:8", "zero")


def _sve_data():
    for i, sz in enumerate(_SIZES):
        dtype, lsl = {"b": "0000", "h": "0101", "s": "1010", "d": "1111"}[sz], \
            f", lsl #{i}" if i else ""
        for load, mn, head, imm_tail in ((True, "ld1", "1010 010", "101"),
                                         (False, "st1", "1110 010", "111")):
            mn = mn + _MEM[sz]
            reg = f"{mn} ({{ )z<zt>.{sz}( }}), p<pg>{'/z' if load else ''}, [<rn:xsp>"
            op = "ld1_z" if load else "st1_z"
            _form(f"{mn}_ss", f"{reg}, <rm:xzr>{lsl}]",
                  f"{head} {dtype} rm:5 010 pg:3 rn:5 zt:5", op, _NOT_ZR, esize=1 << i)
            _form(f"{mn}_si", f"{reg}(, <imm:imm>, mul vl)]",
                  f"{head} {dtype} 0 imm:4:s {imm_tail} pg:3 rn:5 zt:5", op, esize=1 << i)


def _control():
    for sm, za, which in ((1, 1, ""), (1, 0, " sm"), (0, 1, " za")):
        for start in (1, 0):
            mn = ("smstart" if start else "smstop") + which
            crm = f"0{za}{sm}{start}" if not (sm and za) else f"011{start}"
            _form(mn.replace(" ", "_"), mn, f"1101 0101 0000 0011 0100 {crm} 0111 1111",
                  "smstart", sm=bool(sm), za=bool(za), start=bool(start))
    _form("msr_fpcr", "msr fpcr, <rt:xzr>", "1101 0101 0001 1011 0100 0100 000 rt:5", "msr_fpcr")
    _form("mrs_fpcr", "mrs <rt:xzr>, fpcr", "1101 0101 0011 1011 0100 0100 000 rt:5", "mrs_fpcr")
    _form("ptrue", "ptrue p<pd>.<size:esz>(, <pattern:pattern=31>)",
          "0010 0101 size:2 011 000 1110 00 pattern:5 0 pd:4", "ptrue")
    for sf, reg in ((1, "xzr"), (0, "wzr")):
        _form(f"whilelt_{reg[0]}", f"whilelt p<pd>.<size:esz>, <rn:{reg}>, <rm:{reg}>",
              f"0010 0101 size:2 1 rm:5 000 {sf} 01 rn:5 0 pd:4", "whilelt", bits=32 << sf)


def _scalar():
    for sf, bits in ((1, 64), (0, 32)):
        reg, regsp = ("xzr", "xsp") if sf else ("wzr", "wsp")
        allowed = None if sf else _HW32
        mask = (1 << bits) - 1
        for opc, mn in (("10", "movz"), ("00", "movn")):
            invert = mn == "movn"

            def alias(v, invert=invert, mask=mask, bits=bits):
                if v["imm16"] == 0 and v["hw"]:
                    return False  # "lsl #0 takes precedence": the plain form prints
                if not invert:
                    return True
                try:  # a value MOVZ can also produce prints as the MOVZ alias instead
                    _movz_fields(~(v["imm16"] << 16 * v["hw"]) & mask, bits)
                    return False
                except ValueError:
                    return True
            _form(f"mov_{mn}_{reg[0]}", f"mov <rd:{reg}>, <imm16,hw:{mn}{bits}>",
                  f"{sf} {opc} 100101 hw:2 imm16:16 rd:5", "movw", allowed, when=alias,
                  why=f"an immediate one {mn.upper()} holds", bits=bits, opc=mn)
            _form(f"{mn}_{reg[0]}", f"{mn} <rd:{reg}>, <imm16:imm>(, lsl #<hw:hw16>)",
                  f"{sf} {opc} 100101 hw:2 imm16:16 rd:5", "movw", allowed, bits=bits, opc=mn)
        _form(f"movk_{reg[0]}", f"movk <rd:{reg}>, <imm16:imm>(, lsl #<hw:hw16>)",
              f"{sf} 11 100101 hw:2 imm16:16 rd:5", "movw", allowed, bits=bits, opc="movk")
        _form(f"mov_sp_{reg[0]}", f"mov <rd:{regsp}>, <rn:{regsp}>",
              f"{sf} 0 0 100010 sh:1 imm12:12 rn:5 rd:5", "addsub", fixed={"imm12": 0, "sh": 0},
              when=lambda v: 31 in (v["rd"], v["rn"]), why="sp as one operand (a register "
              "move between general registers is not supported)", bits=bits, sub=False)
        for op, mn in ((0, "add"), (1, "sub")):
            _form(f"{mn}_{reg[0]}", f"{mn} <rd:{regsp}>, <rn:{regsp}>, <imm12:imm>(, <sh:lsl12>)",
                  f"{sf} {op} 0 100010 sh:1 imm12:12 rn:5 rd:5", "addsub", bits=bits,
                  sub=bool(op))


_outer_products()
_za_data()
_sve_data()
_control()
_scalar()
FORM = {form.name: form for form in FORMS}
_BY_MNEMONIC: dict[str, list[Form]] = {}
for _f in FORMS:
    _BY_MNEMONIC.setdefault(_f.mnemonic, []).append(_f)
MNEMONICS = sorted(_BY_MNEMONIC)


# -- instructions ------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Instruction:
    """One decoded instruction: its form, field values, 32-bit word and source location."""

    form: Form
    fields: dict
    word: int
    loc: Location | None = None

    @property
    def op(self) -> str:
        return self.form.op

    @property
    def text(self) -> str:
        return disassemble(self.word)

    def __repr__(self) -> str:
        return f"<{self.text} {self.word:#010x}>"


@functools.lru_cache(maxsize=1 << 16)
def _decode(word: int) -> tuple[Form, dict]:
    """The form that prints ``word`` (an alias when its condition holds, as LLVM prints) and the
    field values; forms that are never printed (``mova``) only parse."""
    for form in FORMS:
        if not (form.prints and form.word.matches(word)):
            continue
        values = form.word.decode(word)   # reserved and allowed-value rules raise EncodingError
        if all(values[k] == v for k, v in form.fixed.items()) and (
                form.when is None or form.when(values)):
            return form, values
    raise EncodingError("sme", "word", word, "a supported SME/SVE/A64 encoding "
                                             "(hwsim.isa.sme.MNEMONICS)")


def decode(word: int, loc: Location | None = None) -> Instruction:
    """The instruction encoded by ``word`` (``EncodingError`` if none is supported)."""
    form, values = _decode(int(word))
    return Instruction(form, dict(values), int(word), loc)


@functools.lru_cache(maxsize=1 << 16)   # a program's labels, once per distinct word
def disassemble(word: int) -> str:
    """Assembly text for ``word`` as LLVM prints it (aliases preferred)."""
    form, values = _decode(int(word))
    return form.text(values)


@functools.lru_cache(maxsize=1 << 16)
def _parse(text: str) -> tuple[tuple[Form, tuple, int], ...]:
    """Lower-case instruction text -> ((form, field items, word), ...); ``_LineError`` if
    invalid. Cached: programs repeat their lines."""
    mnemonic = text.split()[0]
    if mnemonic == ".inst":
        return (_inst(text),)
    forms = _BY_MNEMONIC.get(mnemonic)
    if forms is None:
        raise _LineError(0, f"a supported instruction ({', '.join(MNEMONICS)} or .inst)",
                         mnemonic)
    failures = []
    for form in forms:
        try:
            values = form.parse(text)
        except _NoMatch as miss:
            failures.append(miss)
        else:
            return ((form, tuple(values.items()), form.word.encode(**values)),)
    if mnemonic == "mov":
        expanded = _mov_pseudo(text)
        if expanded:
            return expanded
    # a line with some template's shape is judged by it; otherwise by the longest match
    best = max((f.shaped, f.column) for f in failures)
    failures = [f for f in failures if (f.shaped, f.column) == best]
    expected = " or ".join(dict.fromkeys(f.expected for f in failures))
    found = failures[0].found
    if found is None:
        found = re.split(r"\s*[,\]}]", text[best[1]:].strip(), 1)[0] or "end of line"
    raise _LineError(best[1], expected, found)


def _inst(text: str) -> tuple[Form, tuple, int]:
    m = re.fullmatch(r"\.inst\s+(0x[0-9a-f]+|\d+)\s*", text)
    if m is None or int(m.group(1), 0) >> 32:
        raise _LineError(len(".inst") + 1, "a 32-bit word (.inst 0x81a00008)",
                         text[len(".inst"):].strip() or "end of line")
    try:
        form, values = _decode(int(m.group(1), 0))
    except EncodingError:
        raise _LineError(len(".inst") + 1, "a supported SME/SVE/A64 encoding",
                         f"{int(m.group(1), 0):#010x}") from None
    return form, tuple(values.items()), int(m.group(1), 0)


def _mov_pseudo(text: str) -> tuple[tuple[Form, tuple, int], ...] | None:
    """``mov Rd, #imm`` for an immediate no single MOVZ/MOVN holds: MOVZ or MOVN, then MOVKs."""
    m = re.fullmatch(r"mov\s+([xw])(\d+|zr)\s*,\s*(" + _NUM + r")\s*", text)
    if m is None:
        return None
    bits = 64 if m.group(1) == "x" else 32
    try:
        value = _mov_value(m.group(3), bits)
    except ValueError:
        return None
    rd = 31 if m.group(2) == "zr" else int(m.group(2))
    if rd > 31:
        return None
    words, used = mov_words(rd, value, bits)
    forms = [FORM[f"{name}_{m.group(1)}"] for name in ("movz", "movn", "movk")]
    steps = []
    for word in words[used].tolist():
        form = next(f for f in forms if f.word.matches(word))
        steps.append((form, tuple(form.word.decode(word).items()), word))
    return tuple(steps)


# the move wide (immediate) class with its opcode as a field: MOVN 0, MOVZ 2, MOVK 3 (the
# rows of FORMS fix it), to encode mixed sequences of the three at once
_MOVE_WIDE = {bits: _word(f"move wide {bits}", f"{bits // 64} opc:2 100101 hw:2 imm16:16 rd:5")
              for bits in (32, 64)}


def mov_words(rd, values, bits: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """The instructions of ``mov Xd, #value`` (``bits`` 64; ``mov Wd`` for 32) for arrays of
    registers and unsigned values at once: words [..., bits // 16] (uint32) and which of them
    the program holds (``words[used]``, row-major, is the code). One MOVZ or MOVN when it holds
    the value, as the assembler picks; else the ``mov`` pseudo-instruction's expansion: MOVZ, or
    MOVN when fewer halfwords differ from 0xFFFF than from 0, then a MOVK per other halfword."""
    values = np.asarray(values, np.uint64)[..., None]
    hw = np.arange(bits // 16)
    chunks = (values >> (16 * hw).astype(np.uint64) & np.uint64(0xFFFF)).astype(np.int64)
    zero, ones = chunks == 0, chunks == 0xFFFF
    invert = (~ones).sum(axis=-1, keepdims=True) < (~zero).sum(axis=-1, keepdims=True)
    used = np.where(invert, ~ones, ~zero)
    used[..., 0] |= ~used.any(axis=-1)         # 0 and all ones: one MOVZ/MOVN #0
    first = hw == np.argmax(used, axis=-1)[..., None]
    words = _MOVE_WIDE[bits].encode_array(
        rd=np.asarray(rd)[..., None], hw=hw, opc=np.where(first, np.where(invert, 0, 2), 3),
        imm16=np.where(first & invert, chunks ^ 0xFFFF, chunks))
    return words.astype(np.uint32), used


class _LineError(Exception):
    def __init__(self, column: int, expected: str, found: str):
        super().__init__(expected)
        self.column, self.expected, self.found = column, expected, found


def parse_line(text: str, loc: Location | None = None) -> list[Instruction]:
    """One line of assembly -> its instructions (two or more for the ``mov`` pseudo-instruction).

    ``loc`` is where the line's first character is; errors are ``TraceSyntaxError`` there."""
    loc = loc or Location("<asm>", 1, 1)
    stripped = text.strip()
    lead = len(text) - len(text.lstrip())
    if stripped.startswith(".") and stripped.split()[0].lower() != ".inst":
        raise unknown_directive(stripped.split()[0], loc.at(loc.column + lead) if loc.line
                                else loc, (".inst",))
    try:
        parsed = _parse(stripped.lower())
    except _LineError as err:
        where = loc.at(loc.column + lead + err.column) if loc.line else loc
        raise TraceSyntaxError(where, f"{stripped.split()[0].lower() if stripped else ''}: "
                                      f"expected {err.expected}, found {err.found!r}") from None
    return [Instruction(form, dict(items), word, loc) for form, items, word in parsed]


def assemble(text: str) -> int:
    """The 32-bit word of one instruction (``TraceSyntaxError`` if it is not one instruction)."""
    instructions = parse_line(text)
    if len(instructions) != 1:
        raise TraceSyntaxError(Location("<asm>", 1, 1),
                               f"{text.strip()!r} needs {len(instructions)} instructions; "
                               "use assemble_program")
    return instructions[0].word


def assemble_program(text: str, source: str = "<asm>") -> list[Instruction]:
    """Every instruction of a multi-line program (comments with // or #, blank lines allowed)."""
    from hwsim.traces.reader import strip_comment

    program = []
    for number, line in enumerate(text.splitlines(), start=1):
        code = strip_comment(line)
        if code.strip():
            column = len(code) - len(code.lstrip()) + 1
            program += parse_line(code.strip(), Location(source, number, column))
    return program


def encode(name: str, **fields: int) -> Instruction:
    """An instruction of form ``FORM[name]`` from field values, for programs built in Python."""
    try:
        form = FORM[name]
    except KeyError:
        raise HwsimError(f"no SME form {name!r}; hwsim.isa.sme.FORM lists them") from None
    values = {**form.fixed, **fields}
    return Instruction(form, values, form.word.encode(**values))
