"""The HVX work around HMX: layout transforms and FP16 elementwise operations on VTCM.

HVX is modelled as one unit that runs whole layout or elementwise operations, each at a cost per
128-byte vector it produces (or, for unpacking, consumes), calibrated on the V79 costs in
FACTS.md. The operations are real: they read and write VTCM bytes with the layout functions of
``layouts.py``; their trace syntax (all arguments integers, FP16 bounds as bit patterns):

==========================================  =====================================================
``hvx_pack_act(dst, src, h, w, c, mask)``   (h, w, c) FP16 NHWC tensor at ``src`` -> croutons at
                                            ``dst`` (``layouts.pack_nhwc``: tile row, tile
                                            column, channel group; zero padding)
``hvx_unpack_act(dst, src, h, w, c, mask)`` croutons at ``src`` -> the NHWC tensor at ``dst``
``hvx_pack_wgt(dst, src, k_out, k_in)``     OI FP16 weights -> weight vectors (Figure 8)
``hvx_pack_bias(dst, src, k_out, shape)``   ``[k_out, 3]`` FP16 rows (input bias, scale, output
                                            bias) and a Table 5 shape -> bias sets (Figure 13)
``hvx_add(dst, a, b, n)``, ``hvx_mul(...)`` n FP16 elements, IEEE 754 binary16, one rounding to
                                            nearest even, subnormals kept, NaN = 0x7E00
``hvx_relu(dst, a, n)``                     max(x, +0) (NaN stays NaN)
``hvx_clamp(dst, a, n, lo, hi)``            min(max(x, lo), hi), bounds as FP16 bits
==========================================  =====================================================

Not modelled: HVX registers, qfloat arithmetic, per-instruction HVX timing (a layout routine is
costed as a whole), and cache effects (DDR traffic is the DMA's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from hwsim.isa.hmx import BIAS_SET_BYTES, CROUTON_BYTES, VECTOR_BYTES
from hwsim.targets.floats import INF, NAN, RNE, ZERO, jit, round_pack, unpack
from hwsim.targets.hmx import layouts
from hwsim.targets.hmx.numerics import EXP, M_FP16, exact_add

FP16_NAN = 0x7E00  # the quiet NaN HVX results carry


@jit
def fp16_binary(a, b, out, mul):
    """``out = a + b`` (``mul`` false) or ``a * b`` on FP16 bits, one rounding each."""
    for i in range(a.size):
        ca, sa, ma, ea = unpack(a[i], EXP, M_FP16)
        cb, sb, mb, eb = unpack(b[i], EXP, M_FP16)
        if mul:
            sign = sa ^ sb
            if ca == NAN or cb == NAN or (ca == INF and cb == ZERO) or (ca == ZERO and cb == INF):
                out[i] = FP16_NAN
            elif ca == INF or cb == INF:
                out[i] = (sign << 15) | 0x7C00
            else:
                out[i] = round_pack(sign, ma * mb, ea + eb, False, EXP, M_FP16, RNE, False,
                                    False)[0]
        elif ca == NAN or cb == NAN or (ca == INF and cb == INF and sa != sb):
            out[i] = FP16_NAN
        elif ca == INF or cb == INF:
            out[i] = ((sa if ca == INF else sb) << 15) | 0x7C00
        else:
            sign, sig, exp, sticky = exact_add(sa, ma, ea, sb, mb, eb)
            out[i] = round_pack(sign, sig, exp, sticky, EXP, M_FP16, RNE, False, False)[0]


@jit
def _key(bits):
    """Total order of non-NaN FP16 bits by value, -0 below +0."""
    magnitude = np.int64(bits) & 0x7FFF
    return -magnitude - 1 if np.int64(bits) >> 15 else magnitude


@jit
def fp16_clamp(a, out, lo, hi):
    """``out = min(max(a, lo), hi)`` on FP16 bits; a NaN stays NaN."""
    for i in range(a.size):
        x = a[i]
        if unpack(x, EXP, M_FP16)[0] == NAN:
            out[i] = FP16_NAN
        else:
            y = lo if _key(x) < _key(lo) else x
            out[i] = hi if _key(y) > _key(hi) else y


def fp16_binary_twin(a, b, out, mul):
    """numpy twin of ``fp16_binary``: exact in float64, one rounding to float16."""
    x, y = a.view(np.float16).astype(np.float64), b.view(np.float16).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        result = (x * y if mul else x + y).astype(np.float16).view(np.uint16)
    out[:] = np.where(np.isnan(result.view(np.float16)), FP16_NAN, result)


def fp16_clamp_twin(a, out, lo, hi):
    """numpy twin of ``fp16_clamp``: compares as float16, -0 below +0."""
    bound = np.array([lo, hi], dtype=np.uint16)
    lo_v, hi_v = bound.view(np.float16)

    def less(x_bits, y_bits, y_value):  # x < y in value, with -0 < +0
        x = x_bits.view(np.float16)
        return (x < y_value) | ((x == 0) & (y_value == 0) & (x_bits > y_bits))

    y = np.where(less(a, bound[0], lo_v), bound[0], a)
    y = np.where(less(bound[1:].repeat(y.size), y, y.view(np.float16)), bound[1], y)
    out[:] = np.where(np.isnan(a.view(np.float16)), FP16_NAN, y)


@dataclass
class HvxPlan:
    """What one HVX operation touches and costs: VTCM ranges (address, bytes) it reads and
    writes, 128-byte vectors it is charged for, the cost parameter, and ``run(read)``: the
    bytes to write, from a function reading VTCM."""

    reads: list
    writes: list
    vectors: int
    cost: str
    run: Callable


def _fp16(read, addr, n):
    return read(addr, 2 * n).view(np.uint16)


def _pack_act(f):
    th, tw, groups = layouts.crouton_grid(f["h"], f["w"], f["c"], f["mask"])
    out_bytes = th * tw * groups * CROUTON_BYTES
    src = (f["src"], 2 * f["h"] * f["w"] * f["c"])

    def run(read):
        tensor = _fp16(read, f["src"], f["h"] * f["w"] * f["c"]).reshape(f["h"], f["w"], f["c"])
        return layouts.pack_nhwc(tensor, f["mask"])
    return HvxPlan([src], [(f["dst"], out_bytes)], out_bytes // VECTOR_BYTES,
                   "hvx_act_pack_cycles_per_vector", run)


def _unpack_act(f):
    th, tw, groups = layouts.crouton_grid(f["h"], f["w"], f["c"], f["mask"])
    in_bytes = th * tw * groups * CROUTON_BYTES

    def run(read):
        data = read(f["src"], in_bytes)
        return layouts.unpack_nhwc(data, f["h"], f["w"], f["c"], f["mask"]).view(np.uint8)
    return HvxPlan([(f["src"], in_bytes)], [(f["dst"], 2 * f["h"] * f["w"] * f["c"])],
                   in_bytes // VECTOR_BYTES, "hvx_act_unpack_cycles_per_vector", run)


def _pack_wgt(f):
    k_out, k_in = f["k_out"], f["k_in"]
    out_bytes = -(-k_out // 32) * layouts.weight_vectors(k_in) * VECTOR_BYTES

    def run(read):
        return layouts.pack_weights(_fp16(read, f["src"], k_out * k_in).reshape(k_out, k_in))
    return HvxPlan([(f["src"], 2 * k_out * k_in)], [(f["dst"], out_bytes)],
                   out_bytes // VECTOR_BYTES, "hvx_wgt_pack_cycles_per_vector", run)


def _pack_bias(f):
    k = f["k_out"]
    out_bytes = -(-k // 32) * BIAS_SET_BYTES

    def run(read):
        rows = _fp16(read, f["src"], 3 * k).reshape(k, 3).view(np.float16)
        return layouts.pack_bias(rows[:, 1], rows[:, 2], rows[:, 0], f["shape"])
    return HvxPlan([(f["src"], 6 * k)], [(f["dst"], out_bytes)], out_bytes // VECTOR_BYTES,
                   "hvx_bias_pack_cycles_per_vector", run)


def _elementwise(f, kernel):
    n = f["n"]
    sources = [(f[name], 2 * n) for name in ("a", "b") if name in f]

    def run(read):
        out = np.empty(n, dtype=np.uint16)
        kernel(*(_fp16(read, addr, n) for addr, _ in sources), out)
        return out.view(np.uint8)
    return HvxPlan(sources, [(f["dst"], 2 * n)], -(-2 * n // VECTOR_BYTES),
                   "hvx_elementwise_cycles_per_vector", run)


PLANS = {
    "hvx_pack_act": _pack_act,
    "hvx_unpack_act": _unpack_act,
    "hvx_pack_wgt": _pack_wgt,
    "hvx_pack_bias": _pack_bias,
    "hvx_add": lambda f: _elementwise(f, lambda a, b, out: fp16_binary(a, b, out, False)),
    "hvx_mul": lambda f: _elementwise(f, lambda a, b, out: fp16_binary(a, b, out, True)),
    "hvx_relu": lambda f: _elementwise(f, lambda a, out: fp16_clamp(a, out, 0x0000, 0x7C00)),
    "hvx_clamp": lambda f: _elementwise(f, lambda a, out: fp16_clamp(a, out, f["lo"], f["hi"])),
}

# (argument, alignment) that each operation needs; every size argument must be positive
ALIGN = {"hvx_pack_act": {"dst": CROUTON_BYTES, "src": 2},
         "hvx_unpack_act": {"dst": 2, "src": CROUTON_BYTES},
         "hvx_pack_wgt": {"dst": VECTOR_BYTES, "src": 2},
         "hvx_pack_bias": {"dst": BIAS_SET_BYTES, "src": 2}}
LIMITS = {"mask": 31, "shape": 7, "lo": 0xFFFF, "hi": 0xFFFF}


def check(instr) -> None:
    """Argument rules of an HVX line (errors name the argument's column)."""
    f = instr.fields
    names = instr.spec.ints
    for i, name in enumerate(names):
        value = f[name]
        if name in LIMITS:
            if not 0 <= value <= LIMITS[name]:
                raise instr.error(f"{name} = {value:#x}: expected 0..{LIMITS[name]:#x}", i)
            if name in ("lo", "hi") and value & 0x7C00 == 0x7C00 and value & 0x3FF:
                raise instr.error(f"{name} = {value:#x}: expected an FP16 bound, not a NaN", i)
        elif name in ("h", "w", "c", "k_out", "k_in", "n") and value <= 0:
            raise instr.error(f"{name} = {value}: expected a positive size", i)
        align = ALIGN.get(instr.spec.name, {}).get(name, 2)
        if name in ("dst", "src", "a", "b") and value % align:
            raise instr.error(f"{name} = {value:#x}: expected a multiple of {align}", i)
