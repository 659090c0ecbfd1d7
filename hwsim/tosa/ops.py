"""Operator table: argument names, supported types, ERROR_IF checks and MACs per operator.

One ``OpSpec`` row per operator that hwsim lowers or that the imported MLPerf Tiny graphs contain
(TOSA 1.0 chapter 2, and 1.11 for layouts, broadcasting and geometry; docs/sources.md#tosa). A row
names the inputs in spec order, the element types it supports (the "Supported Data Types" tables)
and a check function that applies the operator's ERROR_IF conditions and argument shapes and
returns the output shape it must have. Every message is ``ERROR_IF(<the spec's condition>)`` or
the argument rule, followed by the values found.
Checked only when a value is a constant: zero points and shape arguments (EXT-DYNAMIC graphs may
feed them at run time). Not checked: REQUIRE conditions (data-dependent; the reference model
reports them as UNPREDICTABLE) and LEVEL_CHECK limits. Operators without a row (e.g. RESIZE,
GATHER) are still loaded, run on the reference and shown by ``hwsim inspect``, but not
validated beyond the graph structure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import product
from typing import Callable

from hwsim.shapes import conv_out, window_span

FLOATS = ("fp16", "bf16", "fp32")
FP8 = ("fp8e4m3", "fp8e5m2")
DATA = ("bool", "int8", "int16", "int32") + FLOATS + FP8    # data layout operators


@dataclass(frozen=True)
class OpSpec:
    name: str
    inputs: tuple[str, ...]                   # spec names in order; "name*" is a tensor list
    typed: tuple[str, ...]                    # the roles/attributes a type row lists
    types: frozenset                          # supported rows of element type names
    check: Callable                           # ERROR_IFs; returns the output shape (or None)
    same: dict = field(default_factory=dict)  # role -> role (or "=type") it must match
    macs: Callable | None = None
    outputs: tuple[str, ...] = ("output",)

    def validate(self, op) -> None:
        variadic = self.inputs and self.inputs[-1].endswith("*")
        least = len(self.inputs) - (1 if variadic else 0)
        if len(op.inputs) < least or (not variadic and len(op.inputs) != least):
            raise op.error(f"has {len(op.inputs)} inputs, expected {len(self.inputs)} "
                           f"({', '.join(self.inputs)})")
        if len(op.outputs) != len(self.outputs):
            raise op.error(f"has {len(op.outputs)} outputs, expected {len(self.outputs)}")
        roles = op.roles()
        row = tuple(_type(op, roles, name) for name in self.typed)
        if row not in self.types:
            shown = ", ".join(f"{n}={t}" for n, t in zip(self.typed, row))
            raise op.error(f"unsupported types ({shown}); supported: "
                           f"{', '.join('/'.join(r) for r in sorted(self.types))}")
        for role, ref in self.same.items():
            want = ref[1:] if ref.startswith("=") else _type(op, roles, ref)
            tensors = roles[role] if isinstance(roles[role], list) else [roles[role]]
            for t in tensors:
                if t.dtype.name != want:
                    raise op.error(f"{role} {t.name} is {t.dtype}, expected {want}")
        expected = self.check(op)
        if expected is not None and tuple(expected) != op.output.shape:
            raise op.error(f"output shape {list(op.output.shape)} != {list(expected)} "
                           "computed from the inputs and attributes")


def _type(op, roles, name) -> str:
    if name in op.attrs:
        return op.attrs[name]
    value = roles[name]
    return (value[0] if isinstance(value, list) else value).dtype.name


# -- helpers shared by the checks ------------------------------------------------------------

def error_if(op, condition: bool, text: str, **found) -> None:
    if condition:
        shown = ", ".join(f"{k} = {v}" for k, v in found.items())
        raise op.error(f"ERROR_IF({text})" + (f" with {shown}" if shown else ""))


def dims(op, role: str, rank: int) -> tuple[int, ...]:
    tensor = op.roles()[role]
    if tensor.rank != rank:
        raise op.error(f"{role} {tensor.name} has rank {tensor.rank} (shape "
                       f"{list(tensor.shape)}), expected {rank}")
    return tensor.shape


def values(op, name: str, count: int) -> list[int]:
    got = op.attrs[name]
    if len(got) != count:
        raise op.error(f"attribute {name} has {len(got)} values, expected {count}")
    return got


def one_element(op, *roles: str) -> None:
    for role in roles:
        t = op.roles()[role]
        if t.shape != (1,):
            raise op.error(f"{role} {t.name} has shape {list(t.shape)}, expected [1]")


def zero_point(op, data_role: str, zp_role: str, allowed=("int8",)) -> None:
    """ERROR_IF(!is_same<in_t,i8_t>() && zp != 0): zero points exist only for int8 data."""
    one_element(op, zp_role)
    zp = op.roles()[zp_role]
    if zp.is_const and op.roles()[data_role].dtype.name not in allowed:
        value = op.scalar(zp_role)
        error_if(op, value != 0, f"!is_same<{data_role}_t,i8_t>() && {zp_role} != 0",
                 **{zp_role: value})


def shape_arg(op, role: str, length: int) -> list[int] | None:
    """A shape_t input: its length is checked; its values if it is a constant."""
    t = op.roles()[role]
    if t.size != length:
        raise op.error(f"{role} {t.name} has {t.size} values, expected {length}")
    return [int(v) for v in t.data.reshape(-1)] if t.is_const else None


def out_size(op, axis: str, size: int, kernel: int, pads, stride: int, dilation: int,
             text: str) -> int:
    """The output size of a window axis (``hwsim.shapes.conv_out``) with the spec's ERROR_IF
    on an inexact division and on an empty output."""
    out, exact = conv_out(size, kernel, *pads, stride, dilation)
    error_if(op, not exact, f"{axis} != idiv_check({text}) + 1: "
             f"{window_span(size, kernel, *pads, dilation)} is not a multiple of {stride}")
    error_if(op, out < 1, f"{axis} < 1", **{axis: out})
    return out


def broadcast(op, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    error_if(op, len(a) != len(b), "rank(shape1) != rank(shape2)", shape1=list(a),
             shape2=list(b))
    for x, y in zip(a, b):
        error_if(op, x != 1 and y != 1 and x != y, "shape != broadcast_shape(shape1, shape2)",
                 shape1=list(a), shape2=list(b))
    return tuple(y if x == 1 else x for x, y in zip(a, b))


# -- tensor operators (spec 2.3) -------------------------------------------------------------

def _geometry(op, ih, iw, kh, kw, dilated: bool):
    pt, pb, pl, pr = pad = values(op, "pad", 4)
    sy, sx = stride = values(op, "stride", 2)
    error_if(op, min(pad) < 0, "pad_top < 0 || pad_bottom < 0 || pad_left < 0 || pad_right < 0",
             pad=pad)
    error_if(op, min(stride) < 1, "stride_y < 1 || stride_x < 1", stride=stride)
    if dilated:
        dy, dx = dilation = values(op, "dilation", 2)
        error_if(op, min(dilation) < 1, "dilation_y < 1 || dilation_x < 1", dilation=dilation)
        oh = out_size(op, "OH", ih, kh, (pt, pb), sy, dy,
                      "IH - 1 + pad_top + pad_bottom - (KH - 1) * dilation_y, stride_y")
        ow = out_size(op, "OW", iw, kw, (pl, pr), sx, dx,
                      "IW - 1 + pad_left + pad_right - (KW - 1) * dilation_x, stride_x")
        return oh, ow
    error_if(op, kh < 1 or kw < 1, "kernel_y < 1 || kernel_x < 1", kernel=[kh, kw])
    error_if(op, pr >= kw or pl >= kw, "pad_right >= kernel_x || pad_left >= kernel_x", pad=pad,
             kernel=[kh, kw])
    error_if(op, pt >= kh or pb >= kh, "pad_top >= kernel_y || pad_bottom >= kernel_y", pad=pad,
             kernel=[kh, kw])
    oh = out_size(op, "OH", ih, kh, (pt, pb), sy, 1,
                  "IH + pad_top + pad_bottom - kernel_y, stride_y")
    ow = out_size(op, "OW", iw, kw, (pl, pr), sx, 1,
                  "IW + pad_left + pad_right - kernel_x, stride_x")
    return oh, ow


def _bias(op, channels: int, text: str) -> None:
    bc = dims(op, "bias", 1)[0]
    error_if(op, bc != channels and bc != 1, f"BC != {text} && BC != 1", BC=bc,
             **{text: channels})


def conv2d(op):
    n, ih, iw, ic = dims(op, "input", 4)
    oc, kh, kw, wic = dims(op, "weight", 4)
    if wic != ic:
        raise op.error(f"weight [OC,KH,KW,IC] has IC = {wic}, input has IC = {ic}")
    zero_point(op, "input", "input_zp")
    zero_point(op, "weight", "weight_zp")
    oh, ow = _geometry(op, ih, iw, kh, kw, dilated=True)
    _bias(op, oc, "OC")
    return n, oh, ow, oc


def depthwise_conv2d(op):
    n, ih, iw, c = dims(op, "input", 4)
    kh, kw, wc, m = dims(op, "weight", 4)
    if wc != c:
        raise op.error(f"weight [KH,KW,C,M] has C = {wc}, input has C = {c}")
    zero_point(op, "input", "input_zp")
    zero_point(op, "weight", "weight_zp")
    oh, ow = _geometry(op, ih, iw, kh, kw, dilated=True)
    _bias(op, c * m, "C*M")
    return n, oh, ow, c * m


def matmul(op):
    n, h, c = dims(op, "A", 3)
    bn, bc, w = dims(op, "B", 3)
    if (bn, bc) != (n, c):
        raise op.error(f"B [N,C,W] = {[bn, bc, w]} does not match A [N,H,C] = {[n, h, c]}")
    # spec 2.3.7 reads "is_same<in_t,i8_t> && ..."; the intent is int8 only (sources.md#tosa)
    zero_point(op, "A", "A_zp")
    zero_point(op, "B", "B_zp")
    return n, h, w


def pool2d(op):
    n, ih, iw, c = dims(op, "input", 4)
    kh, kw = values(op, "kernel", 2)
    if "input_zp" in op.roles():
        zero_point(op, "input", "input_zp")
        zero_point(op, "input", "output_zp")
    oh, ow = _geometry(op, ih, iw, kh, kw, dilated=False)
    return n, oh, ow, c


def conv_macs(op) -> int:
    oc, kh, kw, ic = op.weight.shape
    return op.output.size * kh * kw * ic


def depthwise_macs(op) -> int:
    kh, kw = op.weight.shape[:2]
    return op.output.size * kh * kw


def matmul_macs(op) -> int:
    return op.output.size * op.A.shape[2]


# -- elementwise, activation, table, conversion (spec 2.4-2.8, 2.13) --------------------------

def binary(op):
    return broadcast(op, op.input1.shape, op.input2.shape)


def mul(op):
    one_element(op, "shift")
    return binary(op)


def unary(op):
    return op.roles()["input1" if "input1" in op.roles() else "input"].shape


def negate(op):
    zero_point(op, "input1", "input1_zp")
    zero_point(op, "input1", "output_zp")
    return op.input1.shape


def clamp(op):
    low, high = op.min_val, op.max_val
    error_if(op, _isnan(low) or _isnan(high), "isNaN(min_val) || isNaN(max_val)",
             min_val=low, max_val=high)
    error_if(op, high < low, "max_val < min_val", min_val=low, max_val=high)
    dt = op.input.dtype
    if dt.is_int and not (dt.min <= low <= high <= dt.max):
        raise op.error(f"min_val = {low}, max_val = {high} do not fit {dt}")
    return op.input.shape


def _isnan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def table(op):
    size = 256 if op.input1.dtype.name == "int8" else 513
    if op.table.shape != (size,):
        raise op.error(f"table {op.table.name} has shape {list(op.table.shape)}, "
                       f"expected [{size}] (TABLE_SIZE)")
    return op.input1.shape


def rescale(op):
    a, in_t, out_t = op.attrs, op.input.dtype.name, op.output.dtype.name
    nc = op.input.shape[-1] if a["per_channel"] and op.input.rank else 1
    error_if(op, a["per_channel"] and op.input.rank < 1, "per_channel && rank(input) < 1")
    for role, want in (("multiplier", "int32" if a["scale32"] else "int16"), ("shift", "int8")):
        t = op.roles()[role]
        if t.dtype.name != want or t.shape != (nc,):
            raise op.error(f"{role} {t.name} is {t.dtype}{list(t.shape)}, expected "
                           f"{want}[{nc}] (scale32 = {a['scale32']}, per_channel = "
                           f"{a['per_channel']})")
    one_element(op, "input_zp", "output_zp")
    iu, ou = a["input_unsigned"], a["output_unsigned"]
    for role, t, unsigned in (("input_zp", in_t, iu), ("output_zp", out_t, ou)):
        zp = op.scalar(role) if op.roles()[role].is_const else 0
        if unsigned and t in ("int8", "int16"):
            zp &= (1 << (8 if t == "int8" else 16)) - 1
        error_if(op, t != "int8" and (t != "int16" or not unsigned) and zp != 0,
                 f"!is_same<{role[:-3]}_t,i8_t>() && (!is_same<{role[:-3]}_t,i16_t>() || "
                 f"{role[:-3]}_unsigned == false) && {role} != 0", **{role: zp})
        error_if(op, t == "int16" and unsigned and zp not in (0, 32768),
                 f"is_same<{role[:-3]}_t,i16_t>() && {role[:-3]}_unsigned == true && "
                 f"{role} != 0 && {role} != 32768", **{role: zp})
    rules = (
        (a["scale32"] and in_t == "int48", "scale32 && is_same<in_t,i48_t>()"),
        (not a["scale32"] and a["rounding_mode"] == "DOUBLE_ROUND",
         "!scale32 && (rounding_mode == DOUBLE_ROUND)"),
        (iu and ou, "input_unsigned && output_unsigned"),
        (out_t == "int32" and iu, "is_same<out_t,i32_t>() && input_unsigned"),
        (in_t == "int32" and ou, "is_same<in_t,i32_t>() && output_unsigned"),
        (in_t == "int48" and ou, "is_same<in_t,i48_t>() && output_unsigned"),
        (in_t == "int48" and iu, "is_same<in_t,i48_t> && input_unsigned"),
        (in_t == "int32" and iu, "is_same<in_t,i32_t> && input_unsigned"),
        (out_t == "int32" and ou, "is_same<out_t,i32_t> && output_unsigned"),
    )
    for broken, text in rules:
        error_if(op, broken, text)
    return op.input.shape


CASTS = (
    [(a, b) for a, b in product(("int8", "int16", "int32"), repeat=2) if a != b]
    + [(a, b) for i in ("int8", "int16", "int32") for a, b in (("bool", i), (i, "bool"))]
    + [(a, b) for i in ("int8", "int16", "int32") for f in FLOATS for a, b in ((i, f), (f, i))]
    + [("fp16", "fp32"), ("fp32", "fp16"), ("bf16", "fp32"), ("fp32", "bf16")]
    + [(a, b) for e in FP8 for f in FLOATS for a, b in ((e, f), (f, e))]
)


# -- reductions and data layout (spec 2.10-2.11) ----------------------------------------------

def reduce(op):
    shape, axis = op.input.shape, op.axis
    error_if(op, axis < 0 or axis >= len(shape), "axis < 0 || axis >= rank(shape1)", axis=axis,
             rank=len(shape))
    return shape[:axis] + (1,) + shape[axis + 1:]


def concat(op):
    tensors, axis = op.input1, op.axis
    first = tensors[0].shape
    error_if(op, axis < 0 or axis >= max(1, len(first)), "axis < 0 || axis >= "
             "max(1,rank(shapes1[0]))", axis=axis)
    for t in tensors[1:]:
        error_if(op, t.rank != len(first), "rank(shapes1[shape_index]) != rank(shapes1[0])",
                 shapes=[list(x.shape) for x in tensors])
        error_if(op, any(a != b for i, (a, b) in enumerate(zip(t.shape, first)) if i != axis),
                 "shapes1[shape_index][axis_index] != shapes1[0][axis_index]",
                 shapes=[list(x.shape) for x in tensors])
    total = sum(t.shape[axis] for t in tensors)
    return first[:axis] + (total,) + first[axis + 1:]


def pad(op):
    shape = op.input1.shape
    padding = shape_arg(op, "padding", 2 * len(shape))
    one_element(op, "pad_const")
    if padding is None:
        return None
    error_if(op, min(padding, default=0) < 0, "padding[i * 2] < 0 || padding[(i * 2) + 1] < 0",
             padding=padding)
    return tuple(padding[2 * i] + d + padding[2 * i + 1] for i, d in enumerate(shape))


def reshape(op):
    new = shape_arg(op, "shape", op.output.rank)
    error_if(op, op.input1.size != op.output.size, "tensor_size(shape1) != tensor_size(shape)",
             shape1=list(op.input1.shape), shape=list(op.output.shape))
    return new


def slice_(op):
    shape = op.input1.shape
    start, size = shape_arg(op, "start", len(shape)), shape_arg(op, "size", len(shape))
    if start is None or size is None:
        return None
    for i, (s, n, d) in enumerate(zip(start, size, shape)):
        error_if(op, s < 0, "start[index] < 0", index=i, start=s)
        error_if(op, n <= 0, "size[index] <= 0", index=i, size=n)
        error_if(op, s + n > d, "start[index] + size[index] > shape1[index]", index=i, start=s,
                 size=n, shape1=d)
    return tuple(size)


def transpose(op):
    shape, perms = op.input1.shape, op.perms
    error_if(op, len(perms) != len(shape) or sorted(perms) != list(range(len(shape))),
             "perms is not a permutation of 0..rank(shape1)-1", perms=perms)
    return tuple(shape[p] for p in perms)


# -- the table ---------------------------------------------------------------------------------

def _rows(*types) -> frozenset:
    return frozenset(t if isinstance(t, tuple) else (t,) for t in types)


CONV_TYPES = _rows(("int8", "int8", "int32", "int32"), ("int8", "int4", "int32", "int32"),
                   ("int16", "int8", "int48", "int48"), ("fp16", "fp16", "fp16", "fp16"),
                   ("fp16", "fp16", "fp16", "fp32"), ("fp32", "fp32", "fp32", "fp32"),
                   ("bf16", "bf16", "bf16", "fp32"), ("fp8e4m3", "fp8e4m3", "fp16", "fp16"),
                   ("fp8e5m2", "fp8e5m2", "fp16", "fp16"))
CONV_SAME = {"bias": "output", "input_zp": "input", "weight_zp": "weight"}
BINARY_SAME = {"input2": "input1", "output": "input1"}
ARITH = ("int32",) + FLOATS


def _spec(name, inputs, typed, types, check, same=None, macs=None) -> OpSpec:
    return OpSpec(name, tuple(inputs.split()), tuple(typed.split()), types, check,
                  same or {}, macs)


SPECS: dict[str, OpSpec] = {s.name: s for s in (
    _spec("CONV2D", "input weight bias input_zp weight_zp", "input weight output acc_type",
          CONV_TYPES, conv2d, CONV_SAME, conv_macs),
    _spec("DEPTHWISE_CONV2D", "input weight bias input_zp weight_zp",
          "input weight output acc_type", CONV_TYPES, depthwise_conv2d, CONV_SAME,
          depthwise_macs),
    _spec("MATMUL", "A B A_zp B_zp", "A output",
          _rows(("int8", "int32"), ("int16", "int48"), ("fp16", "fp16"), ("fp16", "fp32"),
                ("fp32", "fp32"), ("bf16", "fp32"), ("fp8e4m3", "fp16"), ("fp8e5m2", "fp16")),
          matmul, {"B": "A", "A_zp": "A", "B_zp": "A"}, matmul_macs),
    _spec("AVG_POOL2D", "input input_zp output_zp", "input acc_type",
          _rows(("int8", "int32"), ("int16", "int32"), ("fp16", "fp16"), ("fp16", "fp32"),
                ("fp32", "fp32"), ("bf16", "fp32"), ("fp8e4m3", "fp16"), ("fp8e5m2", "fp16")),
          pool2d, {"output": "input", "input_zp": "input", "output_zp": "input"}),
    _spec("MAX_POOL2D", "input", "input", _rows("int8", "int16", *FLOATS, *FP8), pool2d,
          {"output": "input"}),
    _spec("CLAMP", "input", "input", _rows("int8", "int16", *FLOATS), clamp,
          {"output": "input"}),
    *(_spec(n, "input1 input2", "input1", _rows(*ARITH), binary, BINARY_SAME)
      for n in ("ADD", "SUB", "MAXIMUM", "MINIMUM")),
    *(_spec(n, "input1 input2", "input1", _rows("int8", "int16", "int32"), binary, BINARY_SAME)
      for n in ("ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT")),
    _spec("MUL", "input1 input2 shift", "input1 output",
          _rows(("int8", "int32"), ("int16", "int32"), ("int32", "int32"),
                *((f, f) for f in FLOATS)), mul, {"input2": "input1", "shift": "=int8"}),
    _spec("TABLE", "input1 table", "input1 table output",
          _rows(("int8", "int8", "int8"), ("int16", "int16", "int32")), table),
    _spec("CLZ", "input1", "input1", _rows("int32"), unary, {"output": "input1"}),
    *(_spec(n, "input1", "input1", _rows(*FLOATS), unary, {"output": "input1"})
      for n in ("EXP", "RECIPROCAL", "SIGMOID", "TANH")),
    _spec("NEGATE", "input1 input1_zp output_zp", "input1", _rows("int8", "int16", *ARITH),
          negate, {"output": "input1", "input1_zp": "input1", "output_zp": "input1"}),
    _spec("CAST", "input", "input output", _rows(*CASTS), unary),
    _spec("RESCALE", "input multiplier shift input_zp output_zp", "input output",
          _rows(*product(("int8", "int16", "int32", "int48"), ("int8", "int16", "int32"))),
          rescale, {"input_zp": "input", "output_zp": "output"}),
    _spec("REDUCE_SUM", "input", "input", _rows(*ARITH), reduce, {"output": "input"}),
    *(_spec(n, "input", "input", _rows("int8", "int16", *ARITH), reduce, {"output": "input"})
      for n in ("REDUCE_MAX", "REDUCE_MIN")),
    _spec("CONCAT", "input1*", "input1", _rows(*DATA), concat, {"output": "input1"}),
    _spec("PAD", "input1 padding pad_const", "input1", _rows(*DATA), pad,
          {"output": "input1", "pad_const": "input1", "padding": "=shape"}),
    _spec("RESHAPE", "input1 shape", "input1", _rows(*DATA), reshape,
          {"output": "input1", "shape": "=shape"}),
    _spec("SLICE", "input1 start size", "input1", _rows(*DATA), slice_,
          {"output": "input1", "start": "=shape", "size": "=shape"}),
    _spec("TRANSPOSE", "input1", "input1", _rows(*DATA), transpose, {"output": "input1"}),
    _spec("IDENTITY", "input1", "input1", _rows(*DATA, "int4", "int48"), unary,
          {"output": "input1"}),
)}


def checked_ops() -> list[str]:
    """The operators whose ERROR_IF conditions the IR checks."""
    return sorted(SPECS)

