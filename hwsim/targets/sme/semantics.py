"""What each SME instruction does and what it occupies: one builder per ``Form.op``.

A builder turns a decoded instruction into a ``Recipe``: the unit that executes it, the resources
it reads, writes or partly writes (for the engines' dependency tracking), what it costs (cycles,
latency, MACs, its outer-product datapath, whether it is a scalar ALU op, the memory transfer it
makes) and ``act``, which performs the instruction on the state. ``act`` takes the instruction
(memory instructions name its location in a fault) and returns the bytes a memory instruction
moved (its predicate decides them), else None. This is the reference semantics, run at simulated
time by the simpy engine; the compiled interpreter (``interpreter``) must agree with it.

Every hazard on SME state is interlocked (the scoreboard below makes a consumer wait for its
producer's results), so an instruction performs its whole effect when it starts: no consumer can
start before its ready time, and stores write memory when they start, so a later load sees them as
program order requires. Resources: ``z0``-``z31``, ``p0``-``p15``, ``x0``-``x30``, ``sp``,
``fpcr`` (MRS and MSR; MSR also writes all of ZA, see ``mopa``), and ZA as four row groups
``za0.s``-``za3.s`` (ZA rows equal to k modulo 4): a .S tile is one group, a .H tile two (ZA0.H =
ZA0.S + ZA2.S), .B all four, and a .D tile the group holding it, so a chain on ZA0.S never waits
for ZA1.S, while ZA0.H waits for both halves it overlaps. A slice write (LD1 to a tile, MOVA into
a tile, LDR ZA) is a partial write of its groups: slice writes overlap each other, and the next
full reader or writer waits for all of them.

Memory is ordered against the vector unit's routines (``vector``) by two more resources: every
load and store reads ``mem`` (which a routine writes, so they wait for an earlier routine's
results and a routine waits for them to start), and every store partly writes ``st`` (which a
routine also writes, so it waits for the stores before it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from hwsim.errors import HwsimError, ProgramError
from hwsim.isa.sme import KINDS, PATTERNS, Instruction
from hwsim.targets.sme import kernels
from hwsim.targets.sme.state import FPCR, MASK64


@dataclass
class Recipe:
    unit: str
    act: Callable
    reads: tuple = ()
    writes: tuple = ()
    parts: tuple = ()
    cycles: int = 0
    latency: int = 0
    macs: int = 0
    path: str | None = None     # an outer product's datapath (changing it costs a cycle)
    scalar: bool = False        # an integer ALU op: ``scalar_issue_width`` share a cycle
    memory: str | None = None   # "load" or "store": one transfer of the active bytes
    nbytes: int = 0             # the bytes of that transfer when every element is active


def groups(esize: int, tile: int) -> tuple[str, ...]:
    """The ZA row groups (resources) a tile of ``esize``-byte elements covers."""
    return tuple(f"za{k}.s" for k in range(4) if k % min(esize, 4) == tile % min(esize, 4))


ALL_GROUPS = groups(1, 0)
ZERO_REGISTERS = (KINDS["xzr"], KINDS["wzr"])   # operand kinds where register 31 reads as zero


def xreg(ins: Instruction, name: str) -> tuple[int, tuple[str, ...]]:
    """(register index, resources) of an X/W operand: -1 and no resource for XZR/WZR."""
    n = ins.fields[name]
    kind = ins.form.template.kinds[name]
    if n == 31 and kind in ZERO_REGISTERS:
        return -1, ()
    return n, ("sp",) if n == 31 else (f"x{n}",)


# fields that give only a value, an address offset or a slice offset: no builder's costs or
# resources read them, so words differing only in them share a row of the op table
VALUE_FIELDS = frozenset({"imm16", "hw", "imm12", "sh", "imm", "off"})
MEMORY = ("mem",)      # read by every load and store, written by vector routines
STORED = ("st",)       # partly written by every store, written by vector routines


def _fault(ins: Instruction, exc: HwsimError) -> ProgramError:
    return ProgramError(f"{ins.loc}: {ins.text}: {exc}")


# -- outer products ------------------------------------------------------------------------------

# dtype -> (tile element bytes, source element bytes, MACs per tile element, datapath)
MOPA = {"fp32": (4, 4, 1, "fp32"), "bf16": (2, 2, 1, "b16b16"), "fp16_wide": (4, 2, 2, "wide16"),
        "bf16_wide": (4, 2, 2, "wide16"), "int8": (4, 1, 4, "int8")}


def mopa(m, ins: Instruction) -> Recipe:
    f, a = ins.fields, ins.form.attrs
    tsize, ssize, depth, path = MOPA[a["dtype"]]
    st = m.state
    za, t = st.za_typed[tsize], f["zada"]
    zn, zm = st.zv[ssize][f["zn"]], st.zv[ssize][f["zm"]]
    pn, pm = st.p[f["pn"]], st.p[f["pm"]]
    macs = za.shape[1] ** 2 * depth
    rate, latency = m.timing_of(path)
    issue = math.ceil(macs / rate)
    neg, dtype = a["neg"], a["dtype"]
    if dtype == "int8":
        def compute():
            kernels.mopa_int8(za, t, tsize, zn, zm, pn, pm, neg, *a["unsigned"])
    elif dtype in ("fp32", "bf16"):
        mbits = 23 if dtype == "fp32" else 7

        def compute():
            kernels.mopa_fma(za, t, tsize, zn, zm, pn, pm, ssize, neg, 8, mbits, m.controls())
    else:
        def compute():
            mode = 0 if dtype == "fp16_wide" else (1 if m.ebf() else 2)
            kernels.mopa_dot2(za, t, tsize, zn, zm, pn, pm, neg, mode, m.controls())

    def act(ins):
        if m.numerics:
            compute()
    # FPCR is not a resource here: MSR FPCR writes every ZA group instead (it is rare), so that
    # an outer product after it waits for it and one before it runs first
    reads = (f"z{f['zn']}", f"z{f['zm']}", f"p{f['pn']}", f"p{f['pm']}")
    return Recipe("mx", act, reads, groups(tsize, f["zada"]), cycles=issue,
                  latency=max(0, latency - issue), macs=macs, path=path)


# -- memory --------------------------------------------------------------------------------------

def _address(m, ins: Instruction, esize: int) -> tuple[Callable[[], int], tuple[str, ...]]:
    """A function computing the effective address, and the registers it reads."""
    f, st = ins.fields, m.state
    base, regs = xreg(ins, "rn")
    if "rm" in f:
        index, more = xreg(ins, "rm")
        shift = esize.bit_length() - 1
        return (lambda: (st.reg(base) + (st.reg(index) << shift)) & MASK64), regs + more
    offset = f.get("imm", f.get("off", 0)) * st.svl_bytes
    return (lambda: (st.reg(base) + offset) & MASK64), regs


def _transfer(m, ins, address, data: np.ndarray, active: np.ndarray, load: bool) -> int:
    """Move the active elements of ``data`` (a typed vector or slice view) from or to memory at
    ``address``; inactive elements of a load become zero. Returns the bytes moved."""
    esize, n = data.itemsize, data.shape[0]
    if np.count_nonzero(active) == n:   # the common case, without boolean indexing
        try:
            view = m.state.mem.view(address, n * esize).view(data.dtype)
        except HwsimError as exc:
            raise _fault(ins, exc) from None
        if load:
            data[...] = view
        else:
            view[...] = data
        return n * esize
    count = int(active.sum())
    if count == 0:
        if load:
            data[...] = 0
        return 0
    extent = (int(np.flatnonzero(active)[-1]) + 1) * esize  # inactive elements never fault
    try:
        view = m.state.mem.view(address, extent).view(data.dtype)
    except HwsimError as exc:
        raise _fault(ins, exc) from None
    if load:
        data[...] = 0
        chunk = data[:extent // esize]
        chunk[active[:extent // esize]] = view[active[:extent // esize]]
    else:
        sel = active[:extent // esize]
        view[sel] = data[:extent // esize][sel]
    return count * esize


def ld1_z(m, ins: Instruction) -> Recipe:
    return _vector_memory(m, ins, load=True)


def st1_z(m, ins: Instruction) -> Recipe:
    return _vector_memory(m, ins, load=False)


def _vector_memory(m, ins, load: bool) -> Recipe:
    f, esize, st = ins.fields, ins.form.attrs["esize"], m.state
    address, regs = _address(m, ins, esize)
    vector, active = st.zv[esize][f["zt"]], st.p[f["pg"], ::esize]

    def act(ins):
        return _transfer(m, ins, address(), vector, active, load)
    z, p = f"z{f['zt']}", f"p{f['pg']}"
    cost = dict(memory="load" if load else "store", nbytes=vector.nbytes)
    if load:
        return Recipe("ls", act, regs + (p,) + MEMORY, (z,), **cost)
    return Recipe("ls", act, regs + (p, z) + MEMORY, parts=STORED, **cost)


def _slice(m, ins: Instruction, index_field: str = "rs"):
    """A function returning the addressed tile slice view, and the tile's groups."""
    f, a, st = ins.fields, ins.form.attrs, m.state
    esize = a["esize"]
    tile = {**f, **a.get("tile", {})}["zat"]
    dim = st.svl_bytes // esize
    wv, off, vertical = 12 + f[index_field], f["off"], bool(f["v"])

    def current():
        return st.slice(esize, tile, (st.reg(wv, 32) + off) % dim, vertical)
    return current, groups(esize, tile), (f"x{wv}",)


def ld1_za(m, ins: Instruction) -> Recipe:
    return _slice_memory(m, ins, load=True)


def st1_za(m, ins: Instruction) -> Recipe:
    return _slice_memory(m, ins, load=False)


def _slice_memory(m, ins, load: bool) -> Recipe:
    esize, f = ins.form.attrs["esize"], ins.fields
    address, regs = _address(m, ins, esize)
    current, tiles, wv = _slice(m, ins)
    active = m.state.p[f["pg"], ::esize]

    def act(ins):
        return _transfer(m, ins, address(), current(), active, load)
    reads = regs + wv + (f"p{f['pg']}",) + MEMORY
    cost = dict(memory="load" if load else "store", nbytes=active.size * esize)
    if load:
        return Recipe("ls", act, reads, parts=tiles, **cost)
    return Recipe("ls", act, reads + tiles, parts=STORED, **cost)


def za_array(m, ins: Instruction) -> Recipe:
    """LDR/STR ZA[Wv, #imm], [Xn, #imm, MUL VL]: one whole ZA array row, unpredicated."""
    f, st, load = ins.fields, m.state, ins.op == "ldr_za"
    address, regs = _address(m, ins, 1)
    wv, off, n = 12 + f["rv"], f["off"], st.svl_bytes
    everything = np.ones(n, dtype=np.bool_)

    def act(ins):
        row = st.za[(st.reg(wv, 32) + off) % n]
        return _transfer(m, ins, address(), row, everything, load)
    reads = regs + (f"x{wv}",) + MEMORY
    cost = dict(memory="load" if load else "store", nbytes=n,
                cycles=m.timing.za_array_transfer_cycles)
    if load:
        return Recipe("ls", act, reads, parts=ALL_GROUPS, **cost)
    return Recipe("ls", act, reads + ALL_GROUPS, parts=STORED, **cost)


# -- ZA moves ------------------------------------------------------------------------------------

def mova(m, ins: Instruction) -> Recipe:
    f, esize = ins.fields, ins.form.attrs["esize"]
    current, tiles, wv = _slice(m, ins)
    to_vector = ins.op == "mova_tv"
    vector = m.state.zv[esize][f["zd" if to_vector else "zn"]]
    active = m.state.p[f["pg"], ::esize]

    def act(ins):
        view = current()
        if to_vector:
            vector[active] = view[active]
        else:
            view[active] = vector[active]
    z, p = f"z{f['zd' if to_vector else 'zn']}", f"p{f['pg']}"
    if to_vector:
        return Recipe("mx", act, tiles + wv + (p,), (z,), **m.za_move)
    return Recipe("mx", act, wv + (p, z), parts=tiles, **m.za_move)


def zero(m, ins: Instruction) -> Recipe:
    mask = ins.fields["mask"]
    tiles = [m.state.tile(8, k) for k in range(8) if mask >> k & 1]

    def act(ins):
        for view in tiles:
            view[...] = 0
    return Recipe("mx", act, writes=tuple(sorted({g for k in range(8) if mask >> k & 1
                                                 for g in groups(8, k)})), **m.za_move)


# -- control -------------------------------------------------------------------------------------

def smstart(m, ins: Instruction) -> Recipe:
    a, st = ins.form.attrs, m.state

    def act(ins):
        if a["sm"] and st.sm != a["start"]:
            st.reset_vectors()   # Arm ARM: changing PSTATE.SM zeroes Z, P and FFR
            st.sm = a["start"]
        if a["za"]:
            if a["start"] and not st.za_enabled:
                st.za[...] = 0   # enabling ZA zeroes it
            st.za_enabled = a["start"]
    state = tuple(f"z{i}" for i in range(32)) + tuple(f"p{i}" for i in range(16)) + MEMORY \
        if a["sm"] else ()
    # a barrier for the state it changes
    return Recipe("ctl", act, writes=state + (ALL_GROUPS if a["za"] else ()),
                  cycles=m.timing.smstart_cycles)


def fpcr_move(m, ins: Instruction) -> Recipe:
    st = m.state
    n, regs = xreg(ins, "rt")
    if ins.op == "mrs_fpcr":
        def read(ins):
            st.set_reg(n, st.fpcr)
        return Recipe("ctl", read, ("fpcr",), regs, **m.scalar)
    known = FPCR.encode(**{k: (1 << FPCR.fields[k].width) - 1 for k in FPCR.fields})

    def write(ins):
        value = st.reg(n) & known
        if not m.params.feat_afp:
            value &= ~FPCR.encode(AH=1, FIZ=1, NEP=1)
        if not m.params.feat_ebf16:
            value &= ~FPCR.encode(EBF=1)
        st.fpcr = value
    return Recipe("ctl", write, regs, ("fpcr",) + ALL_GROUPS, **m.scalar)


def _pattern_count(pattern: int, elements: int) -> int:
    """Active elements of a PTRUE pattern (Arm ARM DecodePredCount)."""
    name = PATTERNS.get(pattern, "")
    if name == "all":
        return elements
    if name == "pow2":
        return 1 << (elements.bit_length() - 1)
    if name.startswith("mul"):
        k = int(name[3:])
        return elements - elements % k
    if name.startswith("vl"):
        n = int(name[2:])
        return n if n <= elements else 0
    return 0


def ptrue(m, ins: Instruction) -> Recipe:
    f = ins.fields
    esize = 1 << f["size"]
    count = _pattern_count(f["pattern"], m.state.svl_bytes // esize)

    def act(ins):
        m.state.set_predicate(f["pd"], esize, count)
    return Recipe("ctl", act, writes=(f"p{f['pd']}",), **m.predicate)


def whilelt(m, ins: Instruction) -> Recipe:
    f, bits, st = ins.fields, ins.form.attrs["bits"], m.state
    esize = 1 << f["size"]
    elements = st.svl_bytes // esize
    n, rn = xreg(ins, "rn")
    k, rm = xreg(ins, "rm")

    def signed(v):
        return v - (1 << bits) if v >> (bits - 1) else v

    def act(ins):
        count = max(0, min(elements, signed(st.reg(k, bits)) - signed(st.reg(n, bits))))
        st.set_predicate(f["pd"], esize, count)
    return Recipe("ctl", act, rn + rm, (f"p{f['pd']}",), **m.predicate)


def movw(m, ins: Instruction) -> Recipe:
    f, a, st = ins.fields, ins.form.attrs, m.state
    bits, opc = a["bits"], a["opc"]
    shift = 16 * f["hw"]
    value = f["imm16"] << shift
    n, regs = xreg(ins, "rd")

    def act(ins):
        if opc == "movz":
            st.set_reg(n, value, bits)
        elif opc == "movn":
            st.set_reg(n, ~value, bits)
        else:
            st.set_reg(n, st.reg(n, bits) & ~(0xFFFF << shift) | value, bits)
    return Recipe("ctl", act, regs if opc == "movk" else (), regs, **m.scalar)


def addsub(m, ins: Instruction) -> Recipe:
    f, a, st = ins.fields, ins.form.attrs, m.state
    imm = f["imm12"] << (12 * f["sh"])
    imm = -imm if a["sub"] else imm
    bits = a["bits"]
    d, wd = xreg(ins, "rd")
    n, rn = xreg(ins, "rn")

    def act(ins):
        st.set_reg(d, st.reg(n, bits) + imm, bits)
    return Recipe("ctl", act, rn, wd, **m.scalar)


SEMANTICS = {"mopa": mopa, "ld1_z": ld1_z, "st1_z": st1_z, "ld1_za": ld1_za, "st1_za": st1_za,
             "ldr_za": za_array, "str_za": za_array, "mova_tv": mova, "mova_vt": mova,
             "zero": zero, "smstart": smstart, "msr_fpcr": fpcr_move, "mrs_fpcr": fpcr_move,
             "ptrue": ptrue, "whilelt": whilelt, "movw": movw, "addsub": addsub}

# PSTATE an instruction needs (Arm ARM: CheckStreamingSVEEnabled, CheckSMEAndZAEnabled, ...).
REQUIRES = {"mopa": "sm za", "ld1_za": "sm za", "st1_za": "sm za", "mova_tv": "sm za",
            "mova_vt": "sm za", "ldr_za": "za", "str_za": "za", "zero": "za",
            "ld1_z": "sm", "st1_z": "sm", "ptrue": "sm", "whilelt": "sm"}
