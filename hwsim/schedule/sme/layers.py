"""TOSA operators as SME program pieces, given where their tensors live in ``mem``.

Dot products (CONV2D, DEPTHWISE_CONV2D, MATMUL) become three steps:

1. ``vec pack``: the activations as GEMM panels (im2col for convolutions, per channel group for
   depthwise ones), converted to the mode's operand type (BF16 rounded to nearest even; int8
   kept signed, or offset to unsigned bytes when the zero point is -128);
2. the GEMM kernel (``gemm``) on weights packed at compile time, into a row-major accumulator
   buffer of the tile's type (fp32, BF16 or int32);
3. ``vec add``: the bias, as TOSA adds it after the sum (for int8 with SMOPA it also carries
   ``-input_zp * sum(weights)``, so that padding filled with the zero point contributes 0). A
   layer without bias whose accumulator type is its output type skips this step.

A depthwise convolution is a grouped GEMM whose weights are block-diagonal per group of one
tile's channels: each channel's taps (padded to the outer product's depth) meet only its own
activations, so 1/16 (1/32 for .H tiles) of the MACs do useful work; the outer products still
beat the vector side by an order of magnitude. Every other operator is one vector routine
(``ROUTINES``); RESHAPE copies (a planner may alias it instead).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hwsim.errors import ScheduleError
from hwsim.isa.arguments import TensorRef
from hwsim.isa.sme_vector import DTYPES, SPACE, VecOp
from hwsim.schedule.sme.gemm import PIXEL_TILES, Gemm, Mode, gemm_words
from hwsim.targets.sme import layouts
from hwsim.targets.sme.program import Builder
from hwsim.tosa.ir import Operator, Tensor

# TOSA element type -> vector routine dtype
DTYPE = {"int8": "i8", "int16": "i16", "int32": "i32", "fp32": "f32", "bf16": "bf16"}
DOT_OPS = ("CONV2D", "DEPTHWISE_CONV2D", "MATMUL")
ALIGN = 64


class Memory:
    """``mem`` in two regions: constants from the top down (they live through the program) and
    buffers from ``base`` up, each placed first-fit among the buffers still live when it is
    taken (a buffer lives until the step, e.g. the layer, given as ``last``)."""

    def __init__(self, base: int, end: int):
        self.base, self.top = base, end
        self.live: list[tuple[int, int, float]] = []    # (addr, end, last step)
        self.high = base

    def constant(self, nbytes: int) -> int:
        self.top = (self.top - nbytes) // ALIGN * ALIGN
        self._check(nbytes)
        return self.top

    def buffer(self, nbytes: int, now: float, last: float) -> int:
        self.live = [b for b in self.live if b[2] >= now]
        addr = self.base
        for start, end, _ in sorted(self.live):
            if addr + nbytes <= start:
                break
            addr = max(addr, end)
        end = -(-(addr + max(nbytes, 1)) // ALIGN) * ALIGN
        self.live.append((addr, end, last))
        self.high = max(self.high, end)
        self._check(nbytes)
        return addr

    def _check(self, nbytes: int) -> None:
        if self.high > self.top:
            raise ScheduleError(f"sme: mem is full: buffers reach {self.high:#x}, constants "
                                f"start at {self.top:#x} (placing {nbytes} bytes); raise "
                                "mem_size")


@dataclass
class Emitter:
    """A program being lowered: its words and routines, the memory image to load, where things
    live, and the current step (layer) for buffer lifetimes."""

    mode: Mode
    svl_bytes: int
    memory: Memory
    step: int = 0
    builder: Builder = field(default_factory=Builder)
    image: list = field(default_factory=list)       # (addr, uint8 array)
    consts: dict = field(default_factory=dict)      # (tensor name, shape) -> TensorRef

    def data(self, values: np.ndarray, dtype: str, shape=None) -> TensorRef:
        """Constant data in ``mem`` (encoded as ``dtype``)."""
        from hwsim.targets.sme.vector import encode
        raw = encode(values, dtype).view(np.uint8)
        addr = self.memory.constant(raw.size)
        self.image.append((addr, raw))
        return TensorRef(SPACE, addr, dtype, tuple(shape or np.shape(values)) or (1,))

    def const(self, tensor: Tensor, shape=None) -> TensorRef:
        key = (tensor.name, shape)
        if key not in self.consts:
            self.consts[key] = self.data(tensor.data, DTYPE[tensor.dtype.name],
                                         shape or tensor.shape)
        return self.consts[key]

    def tensor(self, dtype: str, shape, last: float = math.inf) -> TensorRef:
        """A buffer live from the current step to ``last``."""
        shape = tuple(shape)
        nbytes = int(math.prod(shape)) * DTYPES[dtype]
        return TensorRef(SPACE, self.memory.buffer(nbytes, self.step, last), dtype, shape)

    def scratch(self, dtype: str, shape) -> TensorRef:
        """A buffer for the current step only."""
        return self.tensor(dtype, shape, self.step)

    def vec(self, name: str, **args) -> None:
        self.builder.routine(VecOp(name, {k: v for k, v in args.items() if v is not None}))


def reshaped(ref: TensorRef, shape) -> TensorRef:
    return TensorRef(SPACE, ref.addr, ref.dtype, tuple(shape))


# -- dot products --------------------------------------------------------------------------------
@dataclass
class DotPlan:
    """How one dot-product operator maps onto a GEMM."""

    m: int
    n: int
    k: int
    group: int
    weights: list            # per group (or one): [rows, k] weight matrices
    bias: np.ndarray | None  # per output channel (MATMUL: none), before the zero-point fold
    pack: dict               # arguments of the activation ``vec pack``
    zp: int


def dot_unsupported(op: Operator) -> str | None:
    """Why a dot product cannot be lowered (None if it can)."""
    x = op.inputs[0]
    int8 = x.dtype.name == "int8"
    if x.dtype.is_int and not int8:
        return f"{x.dtype.name} operands (only int8 and fp32 dot products are lowered)"
    if op.op == "MATMUL":
        b = op.inputs[1]
        if x.shape[0] != 1:
            return f"batch {x.shape[0]} (only batch 1 is lowered)"
        if int8 and not b.is_const and int(op.scalar("A_zp")) not in (0, -128):
            return "A_zp other than 0 or -128 with a non-constant B (needs B's row sums)"
        if int8 and not b.is_const and int(op.scalar("B_zp")):
            return "B_zp != 0 with a non-constant B"
        return _weight_zp(op, "B_zp") if int8 and b.is_const else None
    if not op.weight.is_const or not op.bias.is_const:
        return "non-constant weights or bias"
    if op.op == "DEPTHWISE_CONV2D" and op.weight.shape[3] != 1:
        return f"channel multiplier {op.weight.shape[3]} (only 1 is lowered)"
    return _weight_zp(op, "weight_zp") if int8 else None


def _weight_zp(op: Operator, role: str) -> str | None:
    """The weights' zero point is subtracted at compile time: the result must stay int8."""
    data, zp = op.inputs[1].data, int(op.scalar(role))
    lo, hi = int(data.min()) - zp, int(data.max()) - zp
    if lo < -128 or hi > 127:
        return f"{role} {zp}: weights - {role} span {lo}..{hi}, " \
               "outside int8 (SMOPA takes int8 weights)"
    return None


def _weights(op: Operator, role: str) -> np.ndarray:
    """Constant weights with their zero point (int8) subtracted."""
    data = op.inputs[1].data
    return data.astype(np.int64) - int(op.scalar(role)) if op.inputs[0].dtype.name == "int8" \
        else data


def dot_plan(op: Operator, mode: Mode, svl_bytes: int) -> DotPlan:
    reason = dot_unsupported(op)
    if reason:
        raise ScheduleError(f"{op.op}[{op.name}]: cannot run on sme: {reason}")
    dim = svl_bytes // mode.tile_bytes
    x = op.inputs[0]
    if op.op == "MATMUL":
        b = op.inputs[1]
        zp = int(op.scalar("A_zp")) if x.dtype.name == "int8" else 0
        weights = [_weights(op, "B_zp")[0].T] if b.is_const else []
        return DotPlan(x.shape[1], b.shape[2], x.shape[2], 0, weights, None, {}, zp)
    w, out = _weights(op, "weight_zp"), op.output.shape
    m = out[0] * out[1] * out[2]
    zp = int(op.scalar("input_zp")) if x.dtype.name == "int8" else 0
    conv = {"kernel": None, "stride": tuple(op.stride), "pad": tuple(op.pad),
            "dilation": tuple(op.dilation)}
    bias = op.bias.data.reshape(-1)
    if op.op == "CONV2D":
        conv["kernel"] = (w.shape[1], w.shape[2])
        return DotPlan(m, w.shape[0], int(math.prod(w.shape[1:])), 0,
                       [w.reshape(w.shape[0], -1)], bias, conv, zp)
    conv["kernel"] = (w.shape[0], w.shape[1])
    taps = layouts.padded(w.shape[0] * w.shape[1], mode.depth)
    return DotPlan(m, w.shape[2], dim * taps, dim, layouts.depthwise_weights(w, dim, taps),
                   bias, conv, zp)


def gemm_note(op: Operator, gemm: Gemm) -> str:
    """What the layer's GEMM is, for the report."""
    parts = [f"GEMM {gemm.m}x{gemm.n}x{gemm.k} ({gemm.mode.name}"]
    if gemm.unsigned:
        parts.append("SUMOPA on activations offset to unsigned")
    if gemm.group:
        parts.append(f"{gemm.groups} block-diagonal groups of {gemm.group} channels: "
                     f"1/{gemm.group} of the outer-product MACs are useful")
    return ", ".join(parts) + ")"


def lower_dot(e: Emitter, op: Operator, refs: dict) -> Gemm:
    """Pack, GEMM and bias of a CONV2D, DEPTHWISE_CONV2D or MATMUL (see the module docstring);
    ``refs`` places the operator's non-constant tensors by name."""
    mode = e.mode
    quantized = mode.src == "i8"
    if quantized != (op.inputs[0].dtype.name == "int8"):
        raise ScheduleError(f"{op.op}[{op.name}]: {op.inputs[0].dtype} operands need "
                            f"{'a float mode' if quantized else 'the int8 mode'}")
    plan = dot_plan(op, mode, e.svl_bytes)
    x, out = refs[op.inputs[0].name], refs[op.output.name]
    unsigned = quantized and plan.zp == -128
    correction = np.zeros(plan.n, np.int64)
    if quantized and not unsigned and plan.zp:
        sums = np.concatenate(plan.weights).astype(np.int64).sum(axis=1)
        correction = -plan.zp * sums[:plan.n]
    probe = Gemm(mode, plan.m, plan.n, plan.k, 0, 0, 0, plan.group, unsigned, e.svl_bytes)
    x_count = probe.panel_elements()[1]
    x_panels = e.scratch("u8" if unsigned else mode.src, (x_count,))
    pack = {"rows": probe.dim, "vectors": PIXEL_TILES, "depth": mode.depth}
    if op.op == "MATMUL":
        a = reshaped(x, (1, plan.m, 1, plan.k))
        e.vec("pack", **{"in": a, "out": x_panels}, **pack, offset=-128 if unsigned else None,
              fill=None)
        w_panels = _matmul_weights(e, op, plan, probe, refs)
    else:
        e.vec("pack", **{"in": x, "out": x_panels}, **plan.pack, **pack,
              group=plan.group or None, fill=0 if unsigned else plan.zp,
              offset=-128 if unsigned else None)
        # a group's rows are one panel block: the groups' panels are the stack's
        w_panels = e.data(layouts.pack_panels(np.concatenate(plan.weights), *probe.w_panel()),
                          mode.src)
    bias = np.resize(plan.bias if plan.bias is not None else 0, plan.n)  # a bias of [1]: all
    if quantized:
        bias = bias.astype(np.int64) + correction
    direct = not np.any(bias) and mode.acc == out.dtype
    acc = out if direct else e.scratch(mode.acc, out.shape)
    gemm = Gemm(mode, plan.m, plan.n, plan.k, w_panels.addr, x_panels.addr, acc.addr,
                plan.group, unsigned, e.svl_bytes)
    e.builder.words(gemm_words(gemm))
    if not direct:
        b = e.data(bias, out.dtype, (1,) * (len(out.shape) - 1) + (plan.n,))
        e.vec("add", a=acc, b=b, out=out)
    return gemm


def _matmul_weights(e: Emitter, op: Operator, plan: DotPlan, probe: Gemm,
                    refs: dict) -> TensorRef:
    rows, vectors, depth = probe.w_panel()
    if plan.weights:
        return e.data(layouts.pack_panels(plan.weights[0], rows, vectors, depth), e.mode.src)
    if plan.zp not in (0, -128):
        raise ScheduleError(f"MATMUL[{op.name}]: A_zp {plan.zp} with a non-constant B needs "
                            "row sums of B at run time (not lowered)")
    panels = e.scratch(e.mode.src, (probe.panel_elements()[0],))
    e.vec("pack", **{"in": refs[op.inputs[1].name], "out": panels}, transpose=1, rows=rows,
          vectors=vectors, depth=depth)
    return panels


# -- everything else: one vector routine each ---------------------------------------------------
def _binary(name):
    def args(e, op, ref):
        extra = {"shift": int(op.scalar("shift"))} if op.op == "MUL" and \
            op.inputs[0].dtype.is_int else {}
        return name, {"a": ref(op.inputs[0]), "b": ref(op.inputs[1]), **extra}
    return args


def _rescale(e, op, ref):
    """An unsigned side's zero point is read zero-extended (the spec's 0..255 for an
    ``output_unsigned`` int8)."""
    in_zp, out_zp = int(op.scalar("input_zp")), int(op.scalar("output_zp"))
    if op.input_unsigned:
        in_zp &= (1 << op.inputs[0].dtype.bits) - 1
    if op.output_unsigned:
        out_zp &= (1 << op.output.dtype.bits) - 1
    return "rescale", {"in": ref(op.inputs[0]), "mult": ref(op.inputs[1]),
                       "shift": ref(op.inputs[2]), "in_zp": in_zp,
                       "out_zp": out_zp, "scale32": int(op.scale32),
                       "rounding": "double" if op.rounding_mode == "DOUBLE_ROUND" else "single",
                       "input_unsigned": int(op.input_unsigned),
                       "output_unsigned": int(op.output_unsigned)}


def _clamp(e, op, ref):
    lo, hi = op.min_val, op.max_val
    if op.inputs[0].dtype.is_float:
        lo, hi = float(np.float32(lo)), float(np.float32(hi))
    return "clamp", {"in": ref(op.inputs[0]), "min": lo, "max": hi}


def _pool(name):
    def args(e, op, ref):
        extra = {}
        if name == "avg_pool2d" and op.inputs[0].dtype.is_int:
            extra = {"in_zp": int(op.scalar("input_zp")), "out_zp": int(op.scalar("output_zp"))}
        return name, {"in": ref(op.inputs[0]), "kernel": tuple(op.kernel),
                      "stride": tuple(op.stride), "pad": tuple(op.pad), **extra}
    return args


def _shape(op, role):
    return tuple(int(v) for v in op.const(role).reshape(-1))


def _unary(name, **fixed):
    return lambda e, op, ref: (name, {"in": ref(op.inputs[0]), **fixed})


VECTOR_OPS = {
    **{n: _binary(n.lower()) for n in ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM")},
    "ARITHMETIC_RIGHT_SHIFT": lambda e, op, ref: ("arithmetic_right_shift", {
        "a": ref(op.inputs[0]), "b": ref(op.inputs[1]), "round": int(op.round)}),
    "LOGICAL_LEFT_SHIFT": _binary("logical_left_shift"),
    "RESCALE": _rescale,
    "CLAMP": _clamp,
    "TABLE": lambda e, op, ref: ("table", {"in": ref(op.inputs[0]), "table": ref(op.inputs[1])}),
    "CLZ": _unary("clz"),
    "EXP": _unary("exp"),
    "RECIPROCAL": _unary("reciprocal"),
    "REDUCE_SUM": lambda e, op, ref: ("reduce_sum", {"in": ref(op.inputs[0]), "axis": op.axis}),
    "REDUCE_MAX": lambda e, op, ref: ("reduce_max", {"in": ref(op.inputs[0]), "axis": op.axis}),
    "AVG_POOL2D": _pool("avg_pool2d"),
    "MAX_POOL2D": _pool("max_pool2d"),
    "RESHAPE": _unary("reshape"),
    "SLICE": lambda e, op, ref: ("slice", {"in": ref(op.inputs[0]), "start": _shape(op, "start"),
                                           "size": _shape(op, "size")}),
    "TRANSPOSE": lambda e, op, ref: ("transpose", {"in": ref(op.inputs[0]),
                                                   "perms": tuple(op.perms)}),
    "PAD": lambda e, op, ref: ("pad", {"in": ref(op.inputs[0]), "padding": _shape(op, "padding"),
                                       "value": op.scalar("pad_const")}),
}
OPERATORS = frozenset(DOT_OPS) | frozenset(VECTOR_OPS)


def lower_vector(e: Emitter, op: Operator, refs: dict) -> None:
    """One vector routine for ``op``; constant inputs go into the memory image."""
    def ref(tensor: Tensor) -> TensorRef:
        return e.const(tensor) if tensor.is_const else refs[tensor.name]
    name, args = VECTOR_OPS[op.op](e, op, ref)
    e.vec(name, **args, out=refs[op.output.name])


def lower(e: Emitter, op: Operator, refs: dict) -> Gemm | None:
    """``op`` as program items appended to ``e`` (tensors placed by ``refs``); its GEMM if it
    is a dot product."""
    if op.op in DOT_OPS:
        return lower_dot(e, op, refs)
    if op.op not in VECTOR_OPS:
        raise ScheduleError(f"{op.op}[{op.name}]: the sme lowering has no {op.op}")
    lower_vector(e, op, refs)
    return None
