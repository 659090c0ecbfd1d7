"""The HVX work around HMX: layout transforms, copies and FP16 arithmetic on VTCM.

HVX is modelled as one unit that runs whole layout, copy or arithmetic operations, each at a
cost per 128-byte vector it produces (or, for unpacking and reductions, consumes), calibrated on
the V79 costs (sources.md#hmx) where known. The operations are real: they read and write VTCM
bytes with the layout functions of ``layouts.py`` and the kernels of ``hvx_kernels.py`` (which
documents the numerics); their trace syntax (all arguments integers, FP16 values as bits):

==============================================  =================================================
``hvx_pack_act(dst, src, h, w, c, mask)``       (h, w, c) FP16 NHWC tensor at ``src`` ->
                                                croutons at ``dst`` (``layouts.pack_nhwc``: tile
                                                row, tile column, channel group; zero padding)
``hvx_unpack_act(dst, src, h, w, c, mask)``     croutons at ``src`` -> the NHWC tensor at ``dst``
``hvx_pack_wgt(dst, src, k_out, k_in)``         OI FP16 weights -> weight vectors (Figure 8)
``hvx_pack_bias(dst, src, k_out, shape)``       ``[k_out, 3]`` FP16 rows (input bias, scale,
                                                output bias), a Table 5 shape -> bias sets
``hvx_add``/``hvx_sub``/``hvx_mul(dst, a, b, n)`` n FP16 elements, one rounding each
``hvx_relu(dst, a, n)``                         max(x, +0) (NaN stays NaN)
``hvx_clamp(dst, a, n, lo, hi)``                min(max(x, lo), hi), bounds as FP16 bits
``hvx_exp(dst, a, n)``, ``hvx_recip(dst, a, n)`` exp(x), 1/x, correctly rounded
``hvx_reduce_sum(dst, src, outer, n, inner)``   [outer, n, inner] -> [outer, inner]: sum in
                                                FP32; ``hvx_reduce_max``: the maximum
``hvx_avg_pool(dst, src, h, w, c, kh, kw, sh,   (h, w, c) -> windows of kh x kw at stride
sw, pad_top, pad_bottom, pad_left, pad_right)`` (sh, sw): the mean of the valid inputs
``hvx_f32_to_f16(dst, src, n)``, ``hvx_f16_to_f32(...)``  n elements converted
``hvx_copy(dst, src, row_bytes, rows,           ``rows`` rows of ``row_bytes`` bytes, row i from
dst_stride, src_stride)``                       ``src + i*src_stride`` to ``dst + i*dst_stride``
                                                (a stride of 0 repeats a row: a broadcast)
``hvx_fill(dst, n, value)``                     n FP16 elements set to ``value``
==============================================  =================================================

A copy costs each row at least one vector (a row shorter than 128 bytes is still a vector load,
align and store). Not modelled: HVX registers, qfloat arithmetic, per-instruction HVX timing (a
routine is costed as a whole), and cache effects (DDR traffic is the DMA's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from hwsim.isa.hmx import BIAS_SET_BYTES, CROUTON_BYTES, HVX_SPECS, VECTOR_BYTES
from hwsim.memory import Copy
from hwsim.shapes import conv_out
from hwsim.targets.hmx import hvx_kernels as K
from hwsim.targets.hmx import layouts


@dataclass
class HvxPlan:
    """What one HVX operation touches and costs: the VTCM ranges (address, bytes) it reads and
    writes (their bounds: for ordering and checks), the 128-byte vectors it is charged for, the
    cost parameter, the bytes it moves through the port (0: the ranges' total), and
    ``run(vtcm)``: reads the operands and returns the commit that stores the results."""

    reads: list
    writes: list
    vectors: int
    cost: str
    run: Callable
    moved: int = 0

    def __post_init__(self):
        if not self.moved:
            self.moved = sum(n for _, n in self.reads + self.writes)


def _fp16(vtcm, addr, n):
    return vtcm.read(addr, 2 * n).view(np.uint16)


def _vectors(nbytes: int) -> int:
    return -(-nbytes // VECTOR_BYTES)


def _store(vtcm, addr, data):
    return lambda: vtcm.store(addr, data)


def _words(vtcm, addr: int) -> tuple:
    """The VTCM as FP16 words, and the word at ``addr`` (2-byte aligned)."""
    return vtcm.data.view(np.uint16), (addr - vtcm.base) // 2


def _pack_act(f):
    th, tw, groups = layouts.crouton_grid(f["h"], f["w"], f["c"], f["mask"])
    out_bytes = th * tw * groups * CROUTON_BYTES
    src = (f["src"], 2 * f["h"] * f["w"] * f["c"])
    grid = layouts.spatial_grid(f["mask"])

    def run(vtcm):
        out = np.empty(out_bytes // 2, dtype=np.uint16)
        K.pack_act(*_words(vtcm, f["src"]), f["h"], f["w"], f["c"], grid, out)
        return _store(vtcm, f["dst"], out)
    return HvxPlan([src], [(f["dst"], out_bytes)], out_bytes // VECTOR_BYTES,
                   "hvx_act_pack_cycles_per_vector", run)


def _unpack_act(f):
    th, tw, groups = layouts.crouton_grid(f["h"], f["w"], f["c"], f["mask"])
    in_bytes = th * tw * groups * CROUTON_BYTES
    grid = layouts.spatial_grid(f["mask"])

    def run(vtcm):
        out = np.empty(f["h"] * f["w"] * f["c"], dtype=np.uint16)
        K.unpack_act(*_words(vtcm, f["src"]), f["h"], f["w"], f["c"], grid, out)
        return _store(vtcm, f["dst"], out)
    return HvxPlan([(f["src"], in_bytes)], [(f["dst"], 2 * f["h"] * f["w"] * f["c"])],
                   in_bytes // VECTOR_BYTES, "hvx_act_unpack_cycles_per_vector", run)


def _pack_wgt(f):
    k_out, k_in = f["k_out"], f["k_in"]
    out_bytes = -(-k_out // 32) * layouts.weight_vectors(k_in) * VECTOR_BYTES

    def run(vtcm):
        weights = _fp16(vtcm, f["src"], k_out * k_in).reshape(k_out, k_in)
        return _store(vtcm, f["dst"], layouts.pack_weights(weights))
    return HvxPlan([(f["src"], 2 * k_out * k_in)], [(f["dst"], out_bytes)],
                   out_bytes // VECTOR_BYTES, "hvx_wgt_pack_cycles_per_vector", run)


def _pack_bias(f):
    k = f["k_out"]
    out_bytes = -(-k // 32) * BIAS_SET_BYTES

    def run(vtcm):
        rows = _fp16(vtcm, f["src"], 3 * k).reshape(k, 3).view(np.float16)
        return _store(vtcm, f["dst"], layouts.pack_bias(rows[:, 1], rows[:, 2], rows[:, 0],
                                                        f["shape"]))
    return HvxPlan([(f["src"], 6 * k)], [(f["dst"], out_bytes)], out_bytes // VECTOR_BYTES,
                   "hvx_bias_pack_cycles_per_vector", run)


def _elementwise(f, kernel, cost="hvx_elementwise_cycles_per_vector"):
    n = f["n"]
    sources = [(f[name], 2 * n) for name in ("a", "b") if name in f]

    def run(vtcm):
        out = np.empty(n, dtype=np.uint16)
        kernel(*(_fp16(vtcm, addr, n) for addr, _ in sources), out)
        return _store(vtcm, f["dst"], out)
    return HvxPlan(sources, [(f["dst"], 2 * n)], _vectors(2 * n), cost, run)


def _convert(f, kernel, size_in, size_out):
    """FP32 <-> FP16 casts, charged per vector of the FP32 side."""
    n = f["n"]
    out_type = np.uint16 if size_out == 2 else np.uint32

    def run(vtcm):
        out = np.empty(n, dtype=out_type)
        kernel(vtcm.read(f["src"], size_in * n).view(np.uint32 if size_in == 4 else np.uint16),
               out)
        return _store(vtcm, f["dst"], out)
    return HvxPlan([(f["src"], size_in * n)], [(f["dst"], size_out * n)], _vectors(4 * n),
                   "hvx_convert_cycles_per_vector", run)


def _reduce(f, kernel):
    outer, n, inner = f["outer"], f["n"], f["inner"]

    def run(vtcm):
        out = np.empty((outer, inner), dtype=np.uint16)
        kernel(_fp16(vtcm, f["src"], outer * n * inner).reshape(outer, n, inner), out)
        return _store(vtcm, f["dst"], out)
    return HvxPlan([(f["src"], 2 * outer * n * inner)], [(f["dst"], 2 * outer * inner)],
                   _vectors(2 * outer * n * inner), "hvx_reduce_cycles_per_vector", run)


def pool_shape(f) -> tuple[int, int]:
    """Output height and width of ``hvx_avg_pool``."""
    return (conv_out(f["h"], f["kh"], f["pad_top"], f["pad_bottom"], f["sh"])[0],
            conv_out(f["w"], f["kw"], f["pad_left"], f["pad_right"], f["sw"])[0])


def _avg_pool(f):
    h, w, c = f["h"], f["w"], f["c"]
    oh, ow = pool_shape(f)

    def run(vtcm):
        out = np.empty((oh, ow, c), dtype=np.uint16)
        K.fp16_avg_pool(_fp16(vtcm, f["src"], h * w * c).reshape(h, w, c), out, f["kh"], f["kw"],
                        f["sh"], f["sw"], f["pad_top"], f["pad_left"])
        return _store(vtcm, f["dst"], out)
    work = _vectors(2 * oh * ow * c * f["kh"] * f["kw"])  # one add per window element
    return HvxPlan([(f["src"], 2 * h * w * c)], [(f["dst"], 2 * oh * ow * c)], work,
                   "hvx_reduce_cycles_per_vector", run)


def _span(addr: int, stride: int, rows: int, row_bytes: int) -> tuple[int, int]:
    """The bounding range (address, bytes) of strided rows."""
    last = addr + (rows - 1) * stride
    return min(addr, last), abs(last - addr) + row_bytes


def _copy(f):
    rows, row_bytes = f["rows"], f["row_bytes"]

    def run(vtcm):
        copy = Copy(vtcm, f["src"], vtcm, f["dst"], row_bytes, rows, f["src_stride"],
                    f["dst_stride"])
        data = copy.gather()
        return lambda: copy.scatter(data)
    return HvxPlan([_span(f["src"], f["src_stride"], rows, row_bytes)],
                   [_span(f["dst"], f["dst_stride"], rows, row_bytes)],
                   rows * _vectors(row_bytes), "hvx_copy_cycles_per_vector", run,
                   moved=2 * rows * row_bytes)


def _fill(f):
    def run(vtcm):
        return _store(vtcm, f["dst"], np.full(f["n"], f["value"], dtype=np.uint16))
    return HvxPlan([], [(f["dst"], 2 * f["n"])], _vectors(2 * f["n"]),
                   "hvx_elementwise_cycles_per_vector", run)


def _binary(mul: bool, negate_b: bool = False):
    def kernel(a, b, out):
        K.fp16_binary(a, b ^ np.uint16(0x8000) if negate_b else b, out, mul)
    return lambda f: _elementwise(f, kernel)


PLANS = {
    "hvx_pack_act": _pack_act,
    "hvx_unpack_act": _unpack_act,
    "hvx_pack_wgt": _pack_wgt,
    "hvx_pack_bias": _pack_bias,
    "hvx_add": _binary(False),
    "hvx_sub": _binary(False, negate_b=True),
    "hvx_mul": _binary(True),
    "hvx_relu": lambda f: _elementwise(f, lambda a, out: K.fp16_clamp(a, out, 0x0000, 0x7C00)),
    "hvx_clamp": lambda f: _elementwise(f, lambda a, out: K.fp16_clamp(a, out, f["lo"],
                                                                       f["hi"])),
    "hvx_exp": lambda f: _elementwise(f, K.fp16_exp, "hvx_exp_cycles_per_vector"),
    "hvx_recip": lambda f: _elementwise(f, K.fp16_recip, "hvx_recip_cycles_per_vector"),
    "hvx_reduce_sum": lambda f: _reduce(f, K.fp16_reduce_sum),
    "hvx_reduce_max": lambda f: _reduce(f, K.fp16_reduce_max),
    "hvx_avg_pool": _avg_pool,
    "hvx_f32_to_f16": lambda f: _convert(f, K.f32_to_f16, 4, 2),
    "hvx_f16_to_f32": lambda f: _convert(f, K.f16_to_f32, 2, 4),
    "hvx_copy": _copy,
    "hvx_fill": _fill,
}

# (argument, alignment) that each operation needs (default 2: FP16 elements)
ALIGN = {"hvx_pack_act": {"dst": CROUTON_BYTES},
         "hvx_unpack_act": {"src": CROUTON_BYTES},
         "hvx_pack_wgt": {"dst": VECTOR_BYTES},
         "hvx_pack_bias": {"dst": BIAS_SET_BYTES},
         "hvx_f32_to_f16": {"src": 4},
         "hvx_f16_to_f32": {"dst": 4},
         "hvx_copy": {"dst": 1, "src": 1}}
LIMITS = {"mask": 31, "shape": 7, "lo": 0xFFFF, "hi": 0xFFFF, "value": 0xFFFF}
SIZES = ("h", "w", "c", "k_out", "k_in", "n", "rows", "row_bytes", "outer", "inner", "kh", "kw",
         "sh", "sw")
ADDRESSES = ("dst", "src", "a", "b")
PADS = {"pad_top": "kh", "pad_bottom": "kh", "pad_left": "kw", "pad_right": "kw"}


def _rules(name: str, ints: tuple) -> tuple:
    """(index, argument, rule, its bound or alignment) for each checked argument of an HVX
    operation: its arguments' rules, from the tables above."""
    rules = []
    for i, arg in enumerate(ints):
        if arg in LIMITS:
            rules.append((i, arg, "limit", LIMITS[arg]))
        elif arg in SIZES:
            rules.append((i, arg, "size", 0))
        elif arg in PADS:
            rules.append((i, arg, "pad", PADS[arg]))
        elif arg in ADDRESSES:
            rules.append((i, arg, "align", ALIGN.get(name, {}).get(arg, 2)))
    return tuple(rules)


_RULES = {spec.name: _rules(spec.name, spec.ints) for spec in HVX_SPECS}  # derived once


def check(instr) -> None:
    """Argument rules of an HVX line (errors name the argument's column)."""
    f = instr.fields
    for i, name, rule, bound in _RULES[instr.spec.name]:
        value = f[name]
        if rule == "limit":
            if not 0 <= value <= bound:
                raise instr.error(f"{name} = {value:#x}: expected 0..{bound:#x}", i)
            if name in ("lo", "hi") and value & 0x7C00 == 0x7C00 and value & 0x3FF:
                raise instr.error(f"{name} = {value:#x}: expected an FP16 bound, not a NaN", i)
        elif rule == "size" and value <= 0:
            raise instr.error(f"{name} = {value}: expected a positive size", i)
        elif rule == "pad" and not 0 <= value < f[bound]:
            raise instr.error(f"{name} = {value}: expected 0..{bound} - 1 = "
                              f"{f[bound] - 1} (every window needs a valid input)", i)
        elif rule == "align" and value % bound:
            raise instr.error(f"{name} = {value:#x}: expected a multiple of {bound}", i)
    if instr.spec.name == "hvx_avg_pool" and min(pool_shape(f)) < 1:
        raise instr.error(f"a {f['kh']} x {f['kw']} window does not fit the padded "
                          f"{f['h']} x {f['w']} input")
    if instr.spec.name == "hvx_copy" and f["rows"] > 1 and abs(f["dst_stride"]) < f["row_bytes"]:
        raise instr.error(f"dst_stride = {f['dst_stride']}: destination rows of {f['row_bytes']} "
                          "bytes overlap (expected |dst_stride| >= row_bytes)", 4)
