"""The SME machine's instruction semantics as a compiled interpreter over a program's arrays.

``semantics`` says what each instruction does, one Python closure per instruction; this module does
the same without Python per instruction, for the engines that run a whole ``SmeProgram``:

* ``decode(words) -> Decoded``: each distinct word decoded once (``sme.decode``) into a row of
  ``COLUMNS`` (int64): its kind (``KINDS``, the ``Form.op`` names, plus ``routine`` for the word
  ``program.ROUTINE``) and the fields the interpreter reads; ``Decoded.index`` maps every
  instruction to its row.
* ``execute(...)``: a numba loop running instructions ``[start, stop)`` in program order on the
  state's arrays. Every SME hazard is interlocked and memory accesses are ordered (``semantics``),
  so program order gives the state any schedule gives. It stops early at a vector routine (which
  the caller runs in Python) or at a memory fault, which nothing of the faulting instruction
  happened before.
* ``run(state, program, decoded, start, stop, numerics, params, moved)``: the Python entry: runs
  one stretch, raises the ``ProgramError`` ``semantics`` would for a fault, and returns where it
  stopped.

``numerics=False`` skips the outer products' arithmetic, as timing-only runs do; loads, stores,
registers and predicates still run. ``moved[i]`` receives the bytes memory instruction ``i`` moved
(what ``semantics._transfer`` returns), for the timing.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

import numpy as np

from hwsim.errors import EncodingError, HwsimError, ProgramError
from hwsim.isa import sme
from hwsim.targets.floats import jit
from hwsim.targets.ieee import host_is_ieee
from hwsim.targets.native import borrow, copy, pointer
from hwsim.targets.sme import kernels, semantics
from hwsim.targets.sme.elements import inline
from hwsim.targets.sme.numerics import CONTROLS, fill_controls
from hwsim.targets.sme.program import ROUTINE
from hwsim.targets.sme.state import CONTROL_FPCR, CONTROL_SM, CONTROL_ZA, FPCR

# ``Form.op`` names (``semantics.SEMANTICS``), loads and stores together, then ``routine``
KINDS = ("routine", "mopa", "ld1_z", "st1_z", "ld1_za", "st1_za", "ldr_za", "str_za", "mova_tv",
         "mova_vt", "zero", "smstart", "msr_fpcr", "mrs_fpcr", "ptrue", "whilelt", "movw",
         "addsub")
KIND = {name: code for code, name in enumerate(KINDS)}
DTYPES = tuple(semantics.MOPA)           # the ``dtype`` column indexes these
COLUMNS = ("kind", "esize", "z", "zm", "p", "pm", "rd", "rn", "rm", "imm", "wv", "off", "tile",
           "vertical", "dtype", "neg", "unsigned_n", "unsigned_m", "bits", "opc", "pattern",
           "mask", "sm", "za", "start", "needs")
(KIND_COL, ESIZE, Z, ZM, P, PM, RD, RN, RM, IMM, WV, OFF, TILE, VERTICAL, DTYPE, NEG, UNSIGNED_N,
 UNSIGNED_M, BITS, OPC, PATTERN, MASK, SM, ZA, START, NEEDS) = range(len(COLUMNS))
NONE = -2                                # no register (an immediate offset); XZR/WZR is -1
NEEDS_SM, NEEDS_ZA, NEEDS_B16B16 = 1, 2, 4
OPCS = ("movz", "movn", "movk")
OK, AT_ROUTINE, FAULT = range(3)         # how ``execute`` stopped

(_ROUTINE, _MOPA, _LD1_Z, _ST1_Z, _LD1_ZA, _ST1_ZA, _LDR_ZA, _STR_ZA, _MOVA_TV, _MOVA_VT, _ZERO,
 _SMSTART, _MSR, _MRS, _PTRUE, _WHILELT, _MOVW, _ADDSUB) = range(len(KINDS))
_FP32, _BF16, _FP16_WIDE, _BF16_WIDE, _INT8 = (DTYPES.index(d) for d in (
    "fp32", "bf16", "fp16_wide", "bf16_wide", "int8"))
_EXACT_FMA, _EXACT_DOT, _EXACT_SOP = range(len(DTYPES), len(DTYPES) + 3)   # in kernel_addresses
_PATTERNS = {name: code for code, name in sme.PATTERNS.items()}
_POW2, _MUL4, _MUL3, _ALL = (_PATTERNS[p] for p in ("pow2", "mul4", "mul3", "all"))
_VL = np.zeros(32, np.int64)    # PTRUE vlN patterns: encoding -> N (0: not a vlN pattern)
for _code, _name in sme.PATTERNS.items():
    _VL[_code] = int(_name[2:]) if _name.startswith("vl") else 0
_KNOWN = FPCR.encode(**{k: (1 << FPCR.fields[k].width) - 1 for k in FPCR.fields})
_AFP_BITS = FPCR.encode(AH=1, FIZ=1, NEP=1)
_EBF = FPCR.encode(EBF=1)


@dataclass
class Decoded:
    """A program's instructions as rows of ``COLUMNS``, one per distinct word."""

    table: np.ndarray         # int64 (distinct words, len(COLUMNS))
    index: np.ndarray         # int32 (instructions,): the row of each instruction
    words: np.ndarray         # uint32 (distinct words,): the word of each row
    instructions: list        # sme.Instruction of each row (None for ROUTINE)

    def column(self, name: str) -> np.ndarray:
        """One column for every instruction (e.g. ``column("kind")``)."""
        return self.table[self.index, COLUMNS.index(name)]


def decode(words) -> Decoded:
    """Decode every instruction of ``words`` (uint32), each distinct word once (in the order
    they first appear)."""
    words = np.asarray(words, np.uint32).reshape(-1)
    unique, inverse = _distinct(words)
    rows, instructions = [], []
    for word in unique.tolist():
        if word == ROUTINE:
            rows.append(_ROUTINE_ROW)
            instructions.append(None)
            continue
        try:
            row, ins = _decoded(word)
        except EncodingError as exc:
            at = int(np.flatnonzero(words == word)[0])
            raise ProgramError(f"instruction {at} ({word:#010x}): {exc}") from None
        rows.append(row)
        instructions.append(ins)
    # joined into a bytearray in one copy: the table is writable, as the compiled loop takes it
    table = np.frombuffer(bytearray().join(rows), np.int64).reshape(len(rows), len(COLUMNS))
    return Decoded(table, inverse, unique, instructions)


# a row as int64 bytes: joined, a table's rows become one array without converting each integer
_PACKED = struct.Struct(f"<{len(COLUMNS)}q")
_ROUTINE_ROW = _PACKED.pack(*(_ROUTINE if c == KIND_COL else 0 for c in range(len(COLUMNS))))


@functools.lru_cache(maxsize=1 << 16)    # programs of one model share most of their words
def _decoded(word: int) -> tuple[bytes, sme.Instruction]:
    ins = sme.decode(word)
    return _PACKED.pack(*_row(ins)), ins


@jit
def _distinct(words):
    """(the distinct words in order of appearance, the index of each word among them): a hash
    table, because sorting a million words (``np.unique``) takes a hundred times longer."""
    bits = 10
    while True:
        size = 1 << bits
        keys = np.full(size, -1, np.int64)
        rows = np.zeros(size, np.int32)
        unique = np.zeros(size // 2, np.uint32)
        inverse = np.zeros(words.shape[0], np.int32)
        count = 0
        for i in range(words.shape[0]):
            word = np.int64(words[i])
            # Fibonacci hashing: the top bits of the 32-bit product, which every bit of the
            # word moves (the low bits would be the word's own low bits: register numbers)
            slot = ((word * 2654435761) & 0xFFFFFFFF) >> (32 - bits)
            while keys[slot] != -1 and keys[slot] != word:
                slot = (slot + 1) & (size - 1)
            if keys[slot] == -1:
                if count == size // 2:
                    break       # half full: start again twice as large
                keys[slot], rows[slot], unique[count] = word, count, words[i]
                count += 1
            inverse[i] = rows[slot]
        else:
            return unique[:count].copy(), inverse
        bits += 1


def _row(ins: sme.Instruction) -> list[int]:
    f, a = ins.fields, ins.form.attrs
    row = dict.fromkeys(COLUMNS, 0)
    row["kind"] = KIND[ins.op]
    needs = semantics.REQUIRES.get(ins.op, "")
    row["needs"] = (NEEDS_SM * ("sm" in needs) | NEEDS_ZA * ("za" in needs)
                    | NEEDS_B16B16 * (a.get("dtype") == "bf16"))
    row["esize"] = a.get("esize", 1)
    row["rm"] = NONE
    for name, column in (("rd", "rd"), ("rn", "rn"), ("rt", "rn"), ("rm", "rm")):
        if name in f:
            row[column] = semantics.xreg(ins, name)[0]
    for name, column in (("zn", "z"), ("zt", "z"), ("zd", "z"), ("zm", "zm"), ("pn", "p"),
                         ("pg", "p"), ("pd", "p"), ("pm", "pm"), ("mask", "mask"),
                         ("pattern", "pattern"), ("off", "off"), ("v", "vertical")):
        if name in f:
            row[column] = f[name]
    if ins.op == "mopa":
        row["esize"] = semantics.MOPA[a["dtype"]][0]
        row.update(tile=f["zada"], dtype=DTYPES.index(a["dtype"]), neg=a["neg"])
        row["unsigned_n"], row["unsigned_m"] = a.get("unsigned", (False, False))
    elif ins.op in ("ld1_z", "st1_z", "ld1_za", "st1_za", "ldr_za", "str_za"):
        row["imm"] = f.get("imm", f.get("off", 0))
    if "rs" in f or "rv" in f:
        row["wv"] = 12 + f.get("rs", f.get("rv", 0))
        row["tile"] = {**f, **a.get("tile", {})}.get("zat", 0)
    if ins.op in ("ptrue", "whilelt"):
        row["esize"] = 1 << f["size"]
    if ins.op == "movw":
        row.update(imm=f["imm16"], off=16 * f["hw"], opc=OPCS.index(a["opc"]))
    if ins.op == "addsub":
        imm = f["imm12"] << 12 * f["sh"]
        row["imm"] = -imm if a["sub"] else imm
    if ins.op == "smstart":
        row.update(sm=a["sm"], za=a["za"], start=a["start"])
    row["bits"] = a.get("bits", 64)
    return [int(row[c]) for c in COLUMNS]


# -- the interpreter ---------------------------------------------------------------------------

@inline
def _reg(x, n, bits):
    """X<n> (W<n> for 32 bits) as uint64; n < 0 is XZR."""
    if n < 0:
        return np.uint64(0)
    return x[n] & np.uint64(0xFFFFFFFF) if bits == 32 else x[n]


@inline
def _set_reg(x, n, value, bits):
    if n >= 0:
        x[n] = np.uint64(value) & np.uint64(0xFFFFFFFF) if bits == 32 else np.uint64(value)


@inline
def _address(ins, x, svl_bytes):
    base = _reg(x, ins[RN], 64)
    if ins[RM] == NONE:
        return base + np.uint64(ins[IMM] * svl_bytes)
    shift = np.uint64(0 if ins[ESIZE] == 1 else (1 if ins[ESIZE] == 2 else
                                                 (2 if ins[ESIZE] == 4 else 3)))
    return base + (_reg(x, ins[RM], 64) << shift)


@inline
def _transfer(data, row0, col0, row_step, col_step, esize, elements, p, p64, pg, mem, base,
              address, load, fault):
    """Move ``elements`` elements between memory at ``address`` and the byte array ``data``
    (element e at ``data[row0 + e*row_step, col0 + e*col_step : ... + esize]``) under predicate
    row ``pg`` (-1: all active); inactive elements of a load become zero. Returns the bytes moved,
    or -1 after recording a fault (address, bytes) in ``fault``."""
    if not ((pg < 0 or kernels.whole(p64, pg, esize)) and row_step == 0 and col_step == esize):
        return _transfer_elements(data, row0, col0, row_step, col_step, esize, elements, p, pg,
                                  mem, base, address, load, fault)
    extent = elements * esize       # every element, contiguous: one copy
    if address < base or address - base > np.uint64(mem.shape[0] - extent):
        fault[0], fault[1] = np.int64(address), extent
        return -1
    memory = mem.ctypes.data + np.int64(address - base)
    register = data.ctypes.data + row0 * data.shape[1] + col0
    if load:
        copy(register, memory, extent)
    else:
        copy(memory, register, extent)
    return extent


@jit
def _transfer_elements(data, row0, col0, row_step, col_step, esize, elements, p, pg, mem, base,
                       address, load, fault):
    """``_transfer`` element by element: some inactive, or a vertical slice."""
    count, last = 0, -1
    for e in range(elements):
        if pg < 0 or p[pg, e * esize]:
            count += 1
            last = e
    if count == 0:
        if load:
            for e in range(elements):
                for b in range(esize):
                    data[row0 + e * row_step, col0 + e * col_step + b] = 0
        return 0
    extent = (last + 1) * esize     # inactive elements never fault
    if address < base or address - base > np.uint64(mem.shape[0] - extent):
        fault[0], fault[1] = np.int64(address), extent
        return -1
    at = np.int64(address - base)
    for e in range(last + 1 if not load else elements):
        on = e <= last and (pg < 0 or p[pg, e * esize])
        r, c = row0 + e * row_step, col0 + e * col_step
        for b in range(esize):
            if load:
                data[r, c + b] = mem[at + e * esize + b] if on else 0
            elif on:
                mem[at + e * esize + b] = data[r, c + b]
    return count * esize


@inline
def _memory(ins, z, p, p64, za, x, mem, base, svl_bytes, fault):
    """LD1/ST1 of a Z register or a ZA tile slice, LDR/STR of a ZA array row: ``_transfer``."""
    kind, esize = ins[KIND_COL], ins[ESIZE]
    address = _address(ins, x, svl_bytes)
    load = kind == _LD1_Z or kind == _LD1_ZA or kind == _LDR_ZA
    if kind == _LD1_Z or kind == _ST1_Z:
        data, pg, row0, col0, row_step, col_step = z, ins[P], ins[Z], 0, 0, esize
    elif kind == _LD1_ZA or kind == _ST1_ZA:
        data, pg = za, ins[P]
        row0, col0, row_step, col_step = _slice(ins, x, svl_bytes)
    else:
        row = (_reg(x, ins[WV], 32) + np.uint64(ins[OFF])) % np.uint64(svl_bytes)
        data, pg, row0, col0, row_step, col_step = za, -1, np.int64(row), 0, 0, 1
    return _transfer(data, row0, col0, row_step, col_step, esize, svl_bytes // esize, p, p64, pg,
                     mem, base, address, load, fault)


@inline
def _slice(ins, x, svl_bytes):
    """(first ZA row, first byte column, row step, column step) of the addressed tile slice."""
    esize, tile = ins[ESIZE], ins[TILE]
    dim = svl_bytes // esize
    index = np.int64((_reg(x, ins[WV], 32) + np.uint64(ins[OFF])) % np.uint64(dim))
    if ins[VERTICAL]:
        return tile, index * esize, esize, 0       # element e: tile row e, column index
    return index * esize + tile, 0, 0, esize       # element e: tile row index, column e


@inline
def _mova(ins, x, z, p, za, svl_bytes):
    esize = ins[ESIZE]
    row0, col0, row_step, col_step = _slice(ins, x, svl_bytes)
    for e in range(svl_bytes // esize):
        if p[ins[P], e * esize]:
            r, c = row0 + e * row_step, col0 + e * col_step
            for b in range(esize):
                if ins[KIND_COL] == _MOVA_TV:
                    z[ins[Z], e * esize + b] = za[r, c + b]
                else:
                    za[r, c + b] = z[ins[Z], e * esize + b]


@inline
def _pattern_count(pattern, elements):
    """Active elements of a PTRUE pattern (Arm ARM DecodePredCount)."""
    if pattern == _ALL:
        return elements
    if pattern == _POW2:
        n = 1
        while n * 2 <= elements:
            n *= 2
        return n
    if pattern == _MUL4:
        return elements - elements % 4
    if pattern == _MUL3:
        return elements - elements % 3
    n = _VL[pattern]
    return n if n <= elements else 0


@inline
def _set_predicate(p, pd, esize, count):
    for b in range(p.shape[1]):
        p[pd, b] = b % esize == 0 and b < count * esize


@inline
def _whilelt(ins, x, p, svl_bytes):
    bits, esize = ins[BITS], ins[ESIZE]
    n, k = _reg(x, ins[RN], bits), _reg(x, ins[RM], bits)
    if bits == 32:
        sn, sk = np.int64(np.int32(np.uint32(n))), np.int64(np.int32(np.uint32(k)))
    else:
        sn, sk = np.int64(n), np.int64(k)
    elements = svl_bytes // esize
    # the difference of two signed 64-bit values can overflow int64, not uint64
    count = 0 if sk <= sn else np.int64(min(np.uint64(elements), np.uint64(sk) - np.uint64(sn)))
    _set_predicate(p, ins[P], esize, count)


@inline
def _scalar(ins, x):
    kind, bits = ins[KIND_COL], ins[BITS]
    if kind == _ADDSUB:
        _set_reg(x, ins[RD], _reg(x, ins[RN], bits) + np.uint64(ins[IMM]), bits)
        return
    shift = np.uint64(ins[OFF])
    value = np.uint64(ins[IMM]) << shift
    if ins[OPC] == 0:
        _set_reg(x, ins[RD], value, bits)
    elif ins[OPC] == 1:
        _set_reg(x, ins[RD], ~value, bits)
    else:
        keep = _reg(x, ins[RD], bits) & ~(np.uint64(0xFFFF) << shift)
        _set_reg(x, ins[RD], keep | value, bits)


@inline
def _smstart(ins, z, p, za, control):
    start = np.uint64(ins[START])
    if ins[SM] and control[CONTROL_SM] != start:
        z.fill(0)    # Arm ARM: changing PSTATE.SM zeroes Z, P and FFR
        p.fill(False)
        control[CONTROL_SM] = start
    if ins[ZA]:
        if start and not control[CONTROL_ZA]:
            za.fill(0)   # enabling ZA zeroes it
        control[CONTROL_ZA] = start


@inline
def _msr(ins, x, control, features, ctl):
    value = _reg(x, ins[RN], 64) & np.uint64(_KNOWN)
    if not features[0]:
        value &= ~np.uint64(_AFP_BITS)
    if not features[1]:
        value &= ~np.uint64(_EBF)
    control[CONTROL_FPCR] = value
    fill_controls(value, features[0] != 0, features[2] != 0, ctl)


@jit
def execute(table, index, start, stop, z, p, za, x, control, mem, base, numerics, features,
            moved, fault, kernel_addresses):
    """Run instructions ``[start, stop)``; returns (``OK`` | ``AT_ROUTINE`` | ``FAULT``, the
    index reached). ``features``: FEAT_AFP, FEAT_EBF16, the EBF=0 default NaN follows FPCR.AH
    (``bf16_sop_dn`` "pseudocode"). ``fault``: (address, bytes) of a fault.
    ``kernel_addresses``: the kernels by ``dtype`` (``kernels.outer``), then their exact
    functions fma, dot, sop (``kernels.exact``)."""
    svl_bytes = za.shape[0]
    table, index, moved, fault = borrow(table), borrow(index), borrow(moved), borrow(fault)
    z, p, za, x, control, mem = borrow(z), borrow(p), borrow(za), borrow(x), \
        borrow(control), borrow(mem)
    p64 = borrow(p.view(np.uint8).view(np.uint64))
    words = kernels.scratch(svl_bytes)
    ctl = np.zeros(CONTROLS, np.int64)
    fill_controls(control[CONTROL_FPCR], features[0] != 0, features[2] != 0, ctl)
    base = np.uint64(base)
    for i in range(start, stop):
        ins = table[index[i]]
        kind = ins[KIND_COL]
        if kind == _ROUTINE:
            return AT_ROUTINE, i
        if kind == _MOPA:
            if numerics:
                _outer_product(ins, z, p, za, control, features, ctl, words, kernel_addresses)
        elif _LD1_Z <= kind <= _STR_ZA:   # loads and stores
            done = _memory(ins, z, p, p64, za, x, mem, base, svl_bytes, fault)
            if done < 0:
                return FAULT, i
            moved[i] = done
        elif kind == _MOVA_TV or kind == _MOVA_VT:
            _mova(ins, x, z, p, za, svl_bytes)
        elif kind == _ZERO:
            for r in range(svl_bytes):
                if ins[MASK] >> (r % 8) & 1:
                    za[r].fill(0)
        elif kind == _SMSTART:
            _smstart(ins, z, p, za, control)
        elif kind == _MSR:
            _msr(ins, x, control, features, ctl)
        elif kind == _MRS:
            _set_reg(x, ins[RN], control[CONTROL_FPCR], 64)
        elif kind == _PTRUE:
            esize = ins[ESIZE]
            _set_predicate(p, ins[P], esize, _pattern_count(ins[PATTERN], svl_bytes // esize))
        elif kind == _WHILELT:
            _whilelt(ins, x, p, svl_bytes)
        else:
            _scalar(ins, x)
    return OK, stop


@inline
def _outer_product(ins, z, p, za, control, features, ctl, words, addresses):
    dtype = ins[DTYPE]
    exact = _EXACT_FMA
    if dtype == _INT8:
        variant = ins[UNSIGNED_N] + 2 * ins[UNSIGNED_M]
    elif dtype == _FP32 or dtype == _BF16:
        variant = 0
    else:
        ebf = (control[CONTROL_FPCR] & np.uint64(_EBF)) != 0 and features[1] != 0
        variant = 0 if dtype == _FP16_WIDE else (1 if ebf else 2)
        exact = _EXACT_SOP if variant == 2 else _EXACT_DOT
    kernels.call_outer(addresses[dtype], (
        pointer(za.ctypes.data), pointer(z.ctypes.data), pointer(p.ctypes.data),
        pointer(ctl.ctypes.data), pointer(words.ctypes.data), np.int64(za.shape[0]),
        ins[TILE], ins[Z], ins[ZM], ins[P], ins[PM], ins[NEG], np.int64(variant),
        addresses[exact]))


# -- the Python entry --------------------------------------------------------------------------

def features(params) -> np.ndarray:
    """The architecture parameters ``execute`` reads, from the machine's parameters."""
    return np.array([params.feat_afp, params.feat_ebf16, params.bf16_sop_dn == "pseudocode"],
                    np.int64)


def _kernels(decoded: Decoded, numerics: bool, params) -> np.ndarray:
    """The addresses of the outer-product kernels and exact functions this program can call, and
    of stand-ins for the others (so that nothing it does not use is compiled)."""
    rows = decoded.table
    dtypes = set(rows[rows[:, KIND_COL] == _MOPA, DTYPE].tolist()) if numerics else set()
    sop = _BF16_WIDE in dtypes
    functions = [kernels.outer(name, code in dtypes) for code, name in enumerate(DTYPES)] + [
        kernels.exact("fma", bool(dtypes & {_FP32, _BF16})),
        kernels.exact("dot", _FP16_WIDE in dtypes or (sop and bool(params.feat_ebf16))),
        kernels.exact("sop", sop)]
    return np.array([f.address for f in functions], np.int64)


class Runner:
    """One program run: what the compiled loop needs, prepared once (the kernels' addresses,
    the architecture features, the host check); ``run`` then costs a call of the loop."""

    def __init__(self, state, program, decoded: Decoded, numerics: bool, params,
                 moved: np.ndarray):
        if numerics and not host_is_ieee():
            raise HwsimError("this thread's float32 arithmetic flushes denormals (x86 MXCSR "
                             "FTZ/DAZ, set by another library); the exact SME outer products "
                             "need it off")
        self.state, self.program, self.decoded, self.moved = state, program, decoded, moved
        self.numerics = numerics
        self.features = features(params)
        self.fault = np.zeros(2, np.int64)
        self.kernels = np.zeros(len(DTYPES) + 3, np.int64)
        # a run of no instruction compiles the loop before the kernels: on a cold start a child
        # process compiles the exact functions meanwhile (``hwsim.targets.sme.warm``)
        self.run(0, 0)
        self.kernels = _kernels(decoded, numerics, params)

    def run(self, start: int, stop: int) -> int:
        """Run from ``start`` until ``stop`` or the first vector routine, whichever comes first,
        and return that position (the routine's index, or ``stop``). ``moved`` (int64, one per
        instruction) receives the bytes each memory instruction moved. A memory fault raises the
        ``ProgramError`` ``semantics`` raises, after the instructions before it."""
        st, d = self.state, self.decoded
        status, at = execute(d.table, d.index, start, stop, st.z, st.p, st.za, st.x, st.control,
                             st.mem.data, st.mem.base, self.numerics, self.features,
                             self.moved, self.fault, self.kernels)
        if status == FAULT:
            address, nbytes = int(self.fault[0]) & semantics.MASK64, int(self.fault[1])
            try:
                st.mem.view(address, nbytes)
            except HwsimError as exc:
                word = int(self.program.words[at])
                raise ProgramError(f"{self.program.loc(at)}: {sme.disassemble(word)}: "
                                   f"{exc}") from None
            raise AssertionError(f"instruction {at}: fault at {address:#x} not confirmed")
        return at

