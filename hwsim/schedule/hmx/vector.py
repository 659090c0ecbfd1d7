"""The operators HMX does not run, on HVX: elementwise, reductions, pooling, data movement.

Each function emits the HVX lines for one operator between FP16 tensors in VTCM (row-major,
NHWC for images), given their addresses and shapes:

* ``binary``: ADD, SUB, MUL with TOSA broadcasting (a broadcast operand is first copied to the
  full shape, ``hvx_copy`` with a stride of 0), one FP16 rounding per element;
* ``unary``: EXP, RECIPROCAL (correctly rounded), CLAMP (bounds rounded to nearest FP16, which
  gives the same result as clamping in FP32 and rounding; ReLU is ``hvx_relu``);
* ``reduce``: REDUCE_SUM (in FP32) and REDUCE_MAX over one axis;
* ``avg_pool``: AVG_POOL2D (FP32 sums divided by the count of valid inputs);
* ``copy_strided``: any strided view to any other (SLICE, PAD after a fill, CONCAT into
  slices, TRANSPOSE, broadcasts), as ``hvx_copy`` rows over the innermost dimensions that
  stay contiguous, one instruction per remaining index;
* ``cast``: FP32 <-> FP16 at a graph's boundary.

RESHAPE moves no data (the same bytes, another shape): the caller aliases the buffers.
Costs are the machine's per-vector HVX costs; a copy whose contiguous rows are short (a
transpose: one element) costs a vector per row.
"""

from __future__ import annotations

import math
from itertools import product

import numpy as np

from hwsim.errors import ScheduleError
from hwsim.schedule.hmx.program import Arena, HmxProgram
from hwsim.shapes import conv_out

FP16 = 2
UNARY = {"EXP": "exp", "RECIPROCAL": "recip"}
BINARY = {"ADD": "add", "SUB": "sub", "MUL": "mul"}
REDUCE = {"REDUCE_SUM": "reduce_sum", "REDUCE_MAX": "reduce_max"}


def fp16_bits(value: float) -> int:
    """A float rounded to nearest FP16 (beyond the range: infinity), as bits."""
    with np.errstate(over="ignore"):
        return int(np.array(value, dtype=np.float64).astype(np.float16).view(np.uint16))


def strides(shape, elem: int = FP16) -> list[int]:
    """Row-major byte strides of a shape."""
    out, step = [], elem
    for d in reversed(shape):
        out.append(step)
        step *= d
    return out[::-1]


def _merged(shape, dst_strides, src_strides) -> list[tuple[int, int, int]]:
    """(size, dst stride, src stride) per dimension, size-1 dimensions dropped and
    neighbours that are one run in both views merged (outer first)."""
    dims = [(n, d, s) for n, d, s in zip(shape, dst_strides, src_strides) if n > 1]
    merged: list[tuple[int, int, int]] = []
    for n, d, s in dims:
        if merged:
            pn, pd, ps = merged[-1]
            if pd == d * n and ps == s * n:
                merged[-1] = (pn * n, d, s)
                continue
        merged.append((n, d, s))
    return merged or [(1, FP16, FP16)]


def copy_strided(program: HmxProgram, dst: int, src: int, shape, dst_strides, src_strides,
                 elem: int = FP16) -> None:
    """Copy the elements of ``shape`` from ``src`` (byte strides ``src_strides``) to ``dst``."""
    dims = _merged(shape, dst_strides, src_strides)
    n, d, s = dims[-1]
    if d == elem and s == elem:  # a contiguous run: the copy's row
        row_bytes, dims = n * elem, dims[:-1]
    else:
        row_bytes = elem
    rows, row_d, row_s = dims[-1] if dims else (1, row_bytes, row_bytes)
    outer = dims[:-1] if dims else []
    for index in product(*(range(n) for n, _, _ in outer)):
        off_d = sum(i * d for i, (_, d, _) in zip(index, outer))
        off_s = sum(i * s for i, (_, _, s) in zip(index, outer))
        program.hvx("copy", dst + off_d, src + off_s, row_bytes, rows, row_d if rows > 1 else
                    row_bytes, row_s if rows > 1 else row_bytes)


def broadcast_to(program: HmxProgram, vtcm: Arena, src: int, shape, out_shape) -> int:
    """A copy of the tensor at ``src`` broadcast to ``out_shape`` (a new VTCM buffer)."""
    if len(shape) != len(out_shape) or any(a not in (1, b) for a, b in zip(shape, out_shape)):
        raise ScheduleError(f"cannot broadcast {list(shape)} to {list(out_shape)}")
    dst = vtcm.alloc(math.prod(out_shape) * FP16, "broadcast", FP16)
    src_strides = [0 if a == 1 else s for a, s in zip(shape, strides(shape))]
    copy_strided(program, dst, src, out_shape, strides(out_shape), src_strides)
    return dst


def binary(program: HmxProgram, vtcm: Arena, op: str, dst: int, a: int, b: int, shape_a, shape_b,
           shape_out) -> None:
    """ADD, SUB or MUL, broadcasting either operand."""
    temps = []
    operands = []
    for addr, shape in ((a, shape_a), (b, shape_b)):
        if tuple(shape) != tuple(shape_out):
            addr = broadcast_to(program, vtcm, addr, shape, shape_out)
            temps.append(addr)
        operands.append(addr)
    program.hvx(BINARY[op], dst, *operands, math.prod(shape_out))
    for addr in temps:
        vtcm.free(addr)


def unary(program: HmxProgram, op: str, dst: int, a: int, n: int, low: float = 0.0,
          high: float = 0.0) -> None:
    """EXP, RECIPROCAL or CLAMP(low, high) of n elements."""
    if op in UNARY:
        program.hvx(UNARY[op], dst, a, n)
        return
    lo, hi = fp16_bits(low), fp16_bits(high)
    if lo == 0 and hi == 0x7C00:
        program.hvx("relu", dst, a, n)
    else:
        program.hvx("clamp", dst, a, n, lo, hi)


def reduce(program: HmxProgram, op: str, dst: int, src: int, shape, axis: int) -> None:
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    program.hvx(REDUCE[op], dst, src, outer, shape[axis], inner)


def avg_pool(program: HmxProgram, dst: int, src: int, shape, kernel, stride, pad) -> None:
    """AVG_POOL2D of an [N, H, W, C] tensor, one image at a time."""
    n, h, w, c = shape
    (kh, kw), (sh, sw) = kernel, stride
    oh = conv_out(h, kh, pad[0], pad[1], sh)[0]
    ow = conv_out(w, kw, pad[2], pad[3], sw)[0]
    for i in range(n):
        program.hvx("avg_pool", dst + i * oh * ow * c * FP16, src + i * h * w * c * FP16, h, w, c,
                    kh, kw, sh, sw, *pad)


def cast(program: HmxProgram, dst: int, src: int, n: int, to_fp16: bool) -> None:
    program.hvx("f32_to_f16" if to_fp16 else "f16_to_f32", dst, src, n)


def slice_(program: HmxProgram, dst: int, src: int, shape, start, size) -> None:
    offset = sum(i * s for i, s in zip(start, strides(shape)))
    copy_strided(program, dst, src + offset, size, strides(size), strides(shape))


def pad(program: HmxProgram, dst: int, src: int, shape, padding, value: float) -> None:
    """PAD: fill the output with the pad value, copy the input inside."""
    out_shape = [padding[2 * i] + d + padding[2 * i + 1] for i, d in enumerate(shape)]
    program.hvx("fill", dst, math.prod(out_shape), fp16_bits(value))
    out_strides = strides(out_shape)
    offset = sum(padding[2 * i] * s for i, s in enumerate(out_strides))
    copy_strided(program, dst + offset, src, shape, out_strides, strides(shape))


def concat(program: HmxProgram, dst: int, sources, shapes, axis: int) -> None:
    out_shape = list(shapes[0])
    out_shape[axis] = sum(s[axis] for s in shapes)
    out_strides = strides(out_shape)
    at = 0
    for src, shape in zip(sources, shapes):
        copy_strided(program, dst + at * out_strides[axis], src, shape, out_strides,
                     strides(shape))
        at += shape[axis]


def transpose(program: HmxProgram, dst: int, src: int, shape, perms) -> None:
    """TRANSPOSE: output dimension i is input dimension perms[i]."""
    in_strides = strides(shape)
    out_shape = [shape[p] for p in perms]
    copy_strided(program, dst, src, out_shape, strides(out_shape), [in_strides[p] for p in perms])
