"""Writing TOSA graphs from Python: a builder that makes a validated ``Graph``.

Each method adds one operator (or the short sequence a converter would emit, e.g.
``fully_connected`` = RESHAPE + 1x1 CONV2D + RESHAPE, as TOSA 1.0 has no FULLY_CONNECTED) and
returns its output tensor, with the output shape computed from the operator's definition and
every attribute given a value (accumulator types follow the spec's type tables). ``build()``
validates the graph (``hwsim.tosa.ir``); ``serialize()``/``save()`` write it through
tosa_serializer (``hwsim.tosa.flatbuf``), so anything built here is a ``.tosa`` file the
reference model runs. ``quantize_scale`` turns a real scale into RESCALE's multiplier and shift
(TOSA 1.0 2.13.2: scale = multiplier * 2^-shift, multiplier normalised to [2^30, 2^31) for
scale32 or [2^14, 2^15) otherwise).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from hwsim.errors import TosaError
from hwsim.shapes import conv_out
from hwsim.tosa.dtypes import DType
from hwsim.tosa.flatbuf import write_tosa
from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.traces.files import atomic_write_bytes

ACC = {"int8": "int32", "int16": "int48", "fp16": "fp16", "bf16": "fp32", "fp32": "fp32",
       "fp8e4m3": "fp16", "fp8e5m2": "fp16"}
CONV_OUT = {"int8": "int32", "int16": "int48", "fp8e4m3": "fp16", "fp8e5m2": "fp16"}


def quantize_scale(scale: float, scale32: bool = True) -> tuple[int, int]:
    """(multiplier, shift) with multiplier * 2^-shift closest to ``scale`` (2 <= shift <= 62).

    The multiplier is normalised (TOSA 1.0 4.5.5: [2^30, 2^31) or [2^14, 2^15)) while the shift
    allows it; a scale below 2^-32 (2^-48 for 16 bits) would need a shift past 62, so it keeps
    shift 62 with a smaller multiplier, down to 0 (the spec requires only multiplier >= 0). A
    scale too large for shift 2 is an error.
    """
    if not scale > 0:
        raise TosaError("RESCALE", f"scale {scale} is not positive")
    bits = 31 if scale32 else 15
    mantissa, exponent = math.frexp(scale)           # scale = mantissa * 2^exponent
    multiplier = round(mantissa * (1 << bits))
    shift = bits - exponent
    if multiplier == 1 << bits:
        multiplier, shift = multiplier >> 1, shift - 1
    if shift > 62:      # exact: a float times a power of two, rounded once
        multiplier, shift = round(math.ldexp(scale, 62)), 62
    if shift < 2:
        raise TosaError("RESCALE", f"scale {scale:g} needs shift {shift}, outside 2..62")
    return multiplier, shift


class GraphBuilder:
    """Build a graph operator by operator; tensors get unique names automatically."""

    def __init__(self, name: str = "main"):
        self.name = name
        self.inputs: list[Tensor] = []
        self.operators: list[Operator] = []
        self._count = 0

    def _name(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    # -- tensors ------------------------------------------------------------------------------
    def input(self, shape: Sequence[int], dt: "str | DType", name: str | None = None) -> Tensor:
        tensor = Tensor(name or self._name("input"), shape, dt)
        self.inputs.append(tensor)
        return tensor

    def const(self, values, dt: "str | DType", name: str | None = None) -> Tensor:
        array = np.asarray(values)
        return Tensor(name or self._name("const"), array.shape, dt, array)

    def shape(self, values: Sequence[int]) -> Tensor:
        return self.const(np.asarray(values, np.int64).reshape(-1), "shape")

    def zero_point(self, value, dt: "str | DType") -> Tensor:
        return self.const(np.asarray([value]), dt)

    def op(self, op: str, inputs: Sequence[Tensor], shape: Sequence[int], dt: "str | DType",
           **attrs) -> Tensor:
        """Any operator: inputs, the output's shape and type, and all its attributes."""
        out = Tensor(self._name(op.lower()), shape, dt)
        self.operators.append(Operator(op, inputs, [out], attrs))
        return out

    # -- tensor operators ---------------------------------------------------------------------
    def conv2d(self, x: Tensor, weight: Tensor, bias: Tensor, stride=(1, 1), pad=(0, 0, 0, 0),
               dilation=(1, 1), input_zp: int = 0, weight_zp: int = 0) -> Tensor:
        n, ih, iw, _ = x.shape
        oc, kh, kw, _ = weight.shape
        oh, ow = _conv_hw((ih, iw), (kh, kw), pad, stride, dilation)
        return self._conv("CONV2D", x, weight, bias, (n, oh, ow, oc), stride, pad, dilation,
                          input_zp, weight_zp)

    def depthwise_conv2d(self, x: Tensor, weight: Tensor, bias: Tensor, stride=(1, 1),
                         pad=(0, 0, 0, 0), dilation=(1, 1), input_zp: int = 0,
                         weight_zp: int = 0) -> Tensor:
        n, ih, iw, c = x.shape
        kh, kw, _, m = weight.shape
        oh, ow = _conv_hw((ih, iw), (kh, kw), pad, stride, dilation)
        return self._conv("DEPTHWISE_CONV2D", x, weight, bias, (n, oh, ow, c * m), stride, pad,
                          dilation, input_zp, weight_zp)

    def _conv(self, op, x, weight, bias, shape, stride, pad, dilation, input_zp, weight_zp):
        in_t = x.dtype.name
        zps = [self.zero_point(input_zp, x.dtype), self.zero_point(weight_zp, weight.dtype)]
        return self.op(op, [x, weight, bias] + zps, shape, CONV_OUT.get(in_t, in_t),
                       pad=list(pad), stride=list(stride), dilation=list(dilation),
                       local_bound=False, acc_type=ACC[in_t])

    def fully_connected(self, x: Tensor, weight: Tensor, bias: Tensor, input_zp: int = 0) \
            -> Tensor:
        """[N, IC] x [OC, IC] -> [N, OC] as RESHAPE, 1x1 CONV2D, RESHAPE."""
        n, ic = x.shape
        oc = weight.shape[0]
        x4 = self.reshape(x, (n, 1, 1, ic))
        if weight.rank == 2:
            weight = (self.const(weight.data.reshape(oc, 1, 1, ic), weight.dtype)
                      if weight.is_const else self.reshape(weight, (oc, 1, 1, ic)))
        return self.reshape(self.conv2d(x4, weight, bias, input_zp=input_zp), (n, oc))

    def matmul(self, a: Tensor, b: Tensor, a_zp: int = 0, b_zp: int = 0) -> Tensor:
        n, h, _ = a.shape
        out = CONV_OUT.get(a.dtype.name, a.dtype.name)
        return self.op("MATMUL", [a, b, self.zero_point(a_zp, a.dtype),
                                  self.zero_point(b_zp, a.dtype)], (n, h, b.shape[2]), out)

    def _pool_shape(self, x, kernel, stride, pad):
        n, ih, iw, c = x.shape
        return (n, *_conv_hw((ih, iw), kernel, pad, stride, (1, 1)), c)

    def avg_pool2d(self, x: Tensor, kernel, stride=(1, 1), pad=(0, 0, 0, 0), input_zp: int = 0,
                   output_zp: int = 0) -> Tensor:
        zps = [self.zero_point(input_zp, x.dtype), self.zero_point(output_zp, x.dtype)]
        return self.op("AVG_POOL2D", [x] + zps, self._pool_shape(x, kernel, stride, pad),
                       x.dtype, kernel=list(kernel), stride=list(stride), pad=list(pad),
                       acc_type=ACC[x.dtype.name] if x.dtype.is_float else "int32")

    def max_pool2d(self, x: Tensor, kernel, stride=(1, 1), pad=(0, 0, 0, 0)) -> Tensor:
        return self.op("MAX_POOL2D", [x], self._pool_shape(x, kernel, stride, pad), x.dtype,
                       kernel=list(kernel), stride=list(stride), pad=list(pad),
                       nan_mode="PROPAGATE")

    # -- elementwise ----------------------------------------------------------------------------
    def _binary(self, op, a, b, dt=None, extra=(), **attrs) -> Tensor:
        shape = tuple(max(x, y) for x, y in zip(a.shape, b.shape))
        return self.op(op, [a, b, *extra], shape, dt or a.dtype, **attrs)

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        return self._binary("ADD", a, b)

    def sub(self, a: Tensor, b: Tensor) -> Tensor:
        return self._binary("SUB", a, b)

    def mul(self, a: Tensor, b: Tensor, shift: int = 0) -> Tensor:
        out = "int32" if a.dtype.is_int else a.dtype
        return self._binary("MUL", a, b, out, [self.const([shift], "int8")])

    def arithmetic_right_shift(self, a: Tensor, b: Tensor, round: bool = True) -> Tensor:
        return self._binary("ARITHMETIC_RIGHT_SHIFT", a, b, round=round)

    def logical_left_shift(self, a: Tensor, b: Tensor) -> Tensor:
        return self._binary("LOGICAL_LEFT_SHIFT", a, b)

    def unary(self, op: str, x: Tensor) -> Tensor:
        """CLZ, EXP, RECIPROCAL, SIGMOID, TANH, IDENTITY."""
        return self.op(op, [x], x.shape, x.dtype)

    def clamp(self, x: Tensor, low, high) -> Tensor:
        return self.op("CLAMP", [x], x.shape, x.dtype, min_val=low, max_val=high,
                       nan_mode="PROPAGATE")

    def table(self, x: Tensor, values) -> Tensor:
        out = "int8" if x.dtype.name == "int8" else "int32"
        return self.op("TABLE", [x, self.const(values, x.dtype)], x.shape, out)

    def cast(self, x: Tensor, dt: "str | DType") -> Tensor:
        return self.op("CAST", [x], x.shape, dt)

    def rescale(self, x: Tensor, scale, dt: "str | DType", input_zp: int = 0,
                output_zp: int = 0, scale32: bool = True, double_round: bool = True) -> Tensor:
        """RESCALE by ``scale`` (a float, or one per channel of the last axis)."""
        scales = np.atleast_1d(np.asarray(scale, np.float64))
        pairs = [quantize_scale(float(s), scale32) for s in scales]
        rounding = "DOUBLE_ROUND" if scale32 and double_round else "SINGLE_ROUND"
        inputs = [x, self.const([m for m, _ in pairs], "int32" if scale32 else "int16"),
                  self.const([s for _, s in pairs], "int8"), self.zero_point(input_zp, x.dtype),
                  self.zero_point(output_zp, dt)]
        return self.op("RESCALE", inputs, x.shape, dt, scale32=scale32, rounding_mode=rounding,
                       per_channel=len(pairs) > 1, input_unsigned=False, output_unsigned=False)

    # -- reductions and data layout -------------------------------------------------------------
    def reduce(self, op: str, x: Tensor, axis: int) -> Tensor:
        """REDUCE_SUM, REDUCE_MAX or REDUCE_MIN over one axis (kept with size 1)."""
        shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
        attrs = {} if op == "REDUCE_SUM" else {"nan_mode": "PROPAGATE"}
        return self.op(op, [x], shape, x.dtype, axis=axis, **attrs)

    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        return self.op("RESHAPE", [x, self.shape(shape)], shape, x.dtype)

    def transpose(self, x: Tensor, perms: Sequence[int]) -> Tensor:
        return self.op("TRANSPOSE", [x], [x.shape[p] for p in perms], x.dtype, perms=list(perms))

    def concat(self, tensors: Sequence[Tensor], axis: int) -> Tensor:
        shape = list(tensors[0].shape)
        shape[axis] = sum(t.shape[axis] for t in tensors)
        return self.op("CONCAT", tensors, shape, tensors[0].dtype, axis=axis)

    def pad(self, x: Tensor, padding: Sequence[int], value=0) -> Tensor:
        shape = [padding[2 * i] + d + padding[2 * i + 1] for i, d in enumerate(x.shape)]
        return self.op("PAD", [x, self.shape(padding), self.const([value], x.dtype)], shape,
                       x.dtype)

    def slice(self, x: Tensor, start: Sequence[int], size: Sequence[int]) -> Tensor:
        return self.op("SLICE", [x, self.shape(start), self.shape(size)], size, x.dtype)

    # -- the graph ------------------------------------------------------------------------------
    def build(self, *outputs: Tensor) -> Graph:
        return Graph(self.operators, self.inputs, outputs, self.name)

    def serialize(self, *outputs: Tensor) -> bytes:
        return write_tosa(self.build(*outputs))

    def save(self, path, *outputs: Tensor) -> Graph:
        graph = self.build(*outputs)
        atomic_write_bytes(path, write_tosa(graph))
        return graph


def _conv_hw(hw, kernel, pad, stride, dilation) -> tuple[int, int]:
    """(OH, OW) of a window operator; the graph's own check reports an inexact size."""
    return tuple(conv_out(hw[i], kernel[i], pad[2 * i], pad[2 * i + 1], stride[i],
                          dilation[i])[0] for i in range(2))
