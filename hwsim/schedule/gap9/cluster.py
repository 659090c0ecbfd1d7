"""TOSA operators as GAP9 cluster kernel calls, and which of them fuse, fold away or tile.

Every cluster kernel (``hwsim.targets.gap9.cluster_kernels``) is one TOSA integer operator; ``call``
writes the kernel line of one operator with its tensors named (resolved to L1 tensors per tile
later) and its constant scalars (zero points, MUL's shift, PAD's value, SLICE's window) as
arguments. Within a layer, ``calls`` then

* folds a CLAMP whose bounds cover its input type (the identity: the converters emit one after
  every int8 RESCALE as ReLU with zero point -128);
* fuses a RESCALE into the kernel producing its int32 input (conv2d, depthwise_conv2d, matmul,
  add, sub, mul, maximum, minimum take an optional output RESCALE), unless it must write
  offset-binary int8 (only the rescale kernel does that, ``output_unsigned``).

Offset-binary int8 (value + 128 as uint8) is the format NE16 reads; tensors may be kept in it
(see ``hwsim.schedule.gap9.plan``). A RESCALE reads it directly (``input_unsigned``, zero point
+ 128) and can write it; a copy (SLICE, PAD, TRANSPOSE) moves it unchanged; other kernels get a
converted copy (``convert``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hwsim.tosa.ir import Operator

KTYPE = {"int8": "i8", "int16": "i16", "int32": "i32"}
ELEMENTWISE = frozenset({"ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "RESCALE", "CLAMP", "TABLE",
                         "CLZ", "CAST", "ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT"})
COPIES = frozenset({"SLICE", "PAD", "TRANSPOSE"})         # move offset-binary bytes unchanged
COPY_KERNELS = frozenset({"slice", "pad", "transpose"})
WINDOWED = frozenset({"CONV2D", "DEPTHWISE_CONV2D", "AVG_POOL2D", "MAX_POOL2D"})
FUSES_RESCALE = frozenset({"conv2d", "depthwise_conv2d", "matmul", "add", "sub", "mul",
                           "maximum", "minimum"})
REDUCTIONS = {"REDUCE_SUM": "reduce_sum", "REDUCE_MAX": "reduce_max"}
OPERATORS = ELEMENTWISE | COPIES | WINDOWED | set(REDUCTIONS) | {"MATMUL", "CONCAT", "RESHAPE"}


@dataclass
class Call:
    """One kernel line: ``tensors`` maps kernel arguments to tensor names (the graph's, or made
    up: ``NAME@s8`` for a converted copy, ``@one``/``@shift30`` for its constants), ``args``
    holds the other arguments."""

    kernel: str
    tensors: dict
    args: dict = field(default_factory=dict)

    @property
    def out(self) -> str:
        return self.tensors["out"]


def _ints(values) -> tuple:
    return tuple(int(v) for v in values)


def _zp(op: Operator, role: str) -> int:
    return int(op.scalar(role))


def _windowed(op: Operator) -> Call:
    x, out = op.inputs[0].name, op.output.name
    if op.op in ("AVG_POOL2D", "MAX_POOL2D"):
        args = {"kernel": _ints(op.kernel), "stride": _ints(op.stride), "pad": _ints(op.pad)}
        if op.op == "AVG_POOL2D":
            args.update(in_zp=_zp(op, "input_zp"), out_zp=_zp(op, "output_zp"))
        return Call(op.op.lower(), {"in": x, "out": out}, args)
    tensors = {"in": x, "weight": op.weight.name, "out": out}
    if not (op.bias.is_const and not op.bias.data.any()):
        tensors["bias"] = op.bias.name
    return Call(op.op.lower(), tensors,
                {"pad": _ints(op.pad), "stride": _ints(op.stride), "dilation": _ints(op.dilation),
                 "in_zp": _zp(op, "input_zp"), "weight_zp": _zp(op, "weight_zp")})


def _binary(op: Operator) -> Call:
    call = Call(op.op.lower(), {"a": op.inputs[0].name, "b": op.inputs[1].name,
                                "out": op.output.name})
    if op.op == "MUL" and _zp(op, "shift"):
        call.args["mul_shift"] = _zp(op, "shift")
    if op.op == "ARITHMETIC_RIGHT_SHIFT":
        call.args["round"] = int(op.round)
    return call


def _rescale(op: Operator) -> Call:
    """RESCALE; an unsigned side's zero point is read zero-extended (spec: ``output_zp`` of an
    ``output_unsigned`` int8 is 0..255)."""
    in_zp, out_zp = _zp(op, "input_zp"), _zp(op, "output_zp")
    if op.input_unsigned:
        in_zp &= (1 << op.input.dtype.bits) - 1
    if op.output_unsigned:
        out_zp &= (1 << op.output.dtype.bits) - 1
    return Call("rescale", {"in": op.input.name, "mult": op.multiplier.name,
                            "shift": op.shift.name, "out": op.output.name},
                {"in_zp": in_zp, "out_zp": out_zp, "scale32": int(op.scale32),
                 "rounding": "double" if op.rounding_mode == "DOUBLE_ROUND" else "single",
                 "input_unsigned": int(op.input_unsigned),
                 "output_unsigned": int(op.output_unsigned)})


def _unary(kernel: str, **args):
    return lambda op: Call(kernel, {"in": op.inputs[0].name, "out": op.output.name},
                           {k: f(op) for k, f in args.items()})


def _pad(op: Operator) -> Call:
    value = op.pad_const.data.reshape(-1)[0].item() if op.pad_const is not None else 0
    return Call("pad", {"in": op.input1.name, "out": op.output.name},
                {"padding": _ints(op.const("padding").reshape(-1)), "value": int(value)})


BUILDERS = {
    **{name: _windowed for name in WINDOWED},
    **{name: _binary for name in ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM",
                                  "ARITHMETIC_RIGHT_SHIFT", "LOGICAL_LEFT_SHIFT")},
    "RESCALE": _rescale,
    "CLAMP": _unary("clamp", min=lambda op: int(op.min_val), max=lambda op: int(op.max_val)),
    "TABLE": lambda op: Call("table", {"in": op.input1.name, "table": op.table.name,
                                       "out": op.output.name}),
    "CLZ": _unary("clz"), "CAST": _unary("cast"),
    **{name: _unary(kernel, axis=lambda op: int(op.axis)) for name, kernel in REDUCTIONS.items()},
    "TRANSPOSE": _unary("transpose", perms=lambda op: _ints(op.perms)),
    "SLICE": _unary("slice", start=lambda op: _ints(op.const("start").reshape(-1)),
                    size=lambda op: _ints(op.const("size").reshape(-1))),
    "PAD": _pad,
    "MATMUL": lambda op: Call("matmul", {"a": op.A.name, "b": op.B.name, "out": op.output.name},
                              {"a_zp": _zp(op, "A_zp"), "b_zp": _zp(op, "B_zp")}),
    "CONCAT": lambda op: Call("concat", {**{f"in{i}": t.name for i, t in enumerate(op.inputs)},
                                         "out": op.output.name}, {"axis": int(op.axis)}),
}


def call(op: Operator) -> Call:
    return BUILDERS[op.op](op)


def is_identity_clamp(op: Operator) -> bool:
    """A CLAMP whose bounds cover its input type: it changes nothing."""
    if op.op != "CLAMP":
        return False
    dt = op.inputs[0].dtype
    return op.min_val <= dt.min and op.max_val >= dt.max


def fusable_rescale(op: Operator) -> bool:
    """A RESCALE a producing kernel can apply to its int32 result."""
    return (op.op == "RESCALE" and op.input.dtype.name == "int32" and not op.input_unsigned
            and not op.output_unsigned and _zp(op, "input_zp") == 0)


# RESCALE by one (2^30 >> 30): converts int8 to and from offset-binary exactly
ONE = ("@one", np.array([1 << 30], np.int32))
SHIFT = ("@shift30", np.array([30], np.int8))


def convert(src: str, dst: str, to_offset: int) -> Call:
    """A rescale kernel copying int8 ``src`` to ``dst`` with offset ``to_offset`` (0 or 128)."""
    to_binary = int(to_offset == 128)
    return Call("rescale", {"in": src, "mult": ONE[0], "shift": SHIFT[0], "out": dst},
                {"in_zp": 128 * (1 - to_binary), "out_zp": 128 * to_binary, "scale32": 1,
                 "rounding": "single", "input_unsigned": 1 - to_binary,
                 "output_unsigned": to_binary})


def calls(ops: list, in_offsets: dict, out_offset: int) -> list[Call]:
    """The kernel calls of a layer's operators (not a view). ``in_offsets``: offset of each
    external input (128: offset-binary); ``out_offset``: the output's."""
    out: list[Call] = []
    alias: dict[str, str] = {}
    by_output: dict[str, Call] = {}
    root = ops[-1].output.name

    def resolve(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    for op in ops:
        source = resolve(op.inputs[0].name)
        if is_identity_clamp(op):
            alias[op.output.name] = source
            continue
        producer = by_output.get(source)
        if (fusable_rescale(op) and producer is not None and producer.kernel in FUSES_RESCALE
                and "mult" not in producer.tensors
                and not (out_offset and _feeds_root(ops, op, root))):
            producer.tensors.update(mult=op.multiplier.name, shift=op.shift.name,
                                    out=op.output.name)
            producer.args.update(out_zp=_zp(op, "output_zp"), scale32=int(op.scale32),
                                 rounding="double" if op.rounding_mode == "DOUBLE_ROUND"
                                 else "single")
            by_output[op.output.name] = by_output.pop(source)
            continue
        c = call(op)
        c.tensors = {k: (v if k == "out" else resolve(v)) for k, v in c.tensors.items()}
        out.append(c)
        by_output[op.output.name] = c
    final = resolve(root)
    for c in out:                       # a folded CLAMP's producer writes the layer output
        c.tensors = {k: root if v == final else v for k, v in c.tensors.items()}
    return _offsets(out, in_offsets, out_offset, root)


def _offsets(out: list[Call], in_offsets: dict, out_offset: int, root: str) -> list[Call]:
    """Read offset-binary inputs (a rescale reads them as unsigned, a copy keeping the format
    moves them, other kernels get a converted copy) and write the output with ``out_offset``."""
    first = []
    for name, offset in in_offsets.items():
        if not offset:
            continue
        copy = f"{name}@s8"
        for c in out:
            for key, value in list(c.tensors.items()):
                if value != name or key == "out":
                    continue
                if c.kernel == "rescale" and not c.args["input_unsigned"]:
                    c.args.update(input_unsigned=1, in_zp=c.args["in_zp"] + offset)
                elif not (c.kernel in COPY_KERNELS and c.out == root and out_offset == offset):
                    c.tensors[key] = copy
        if any(copy in c.tensors.values() for c in out):
            first.append(convert(name, copy, 0))
    if out_offset:
        writer = next(c for c in out if c.out == root)
        if writer.kernel == "rescale":
            writer.args.update(output_unsigned=1, out_zp=writer.args["out_zp"] + out_offset)
        elif writer.kernel == "pad":
            writer.args["value"] += out_offset
        elif writer.kernel not in COPY_KERNELS:
            raise ValueError(f"{writer.kernel} cannot write offset-binary int8")
    return first + out


def makes_offset(ops: list) -> bool:
    """Whether the layer's output can be written offset-binary: a last RESCALE to int8 (maybe
    behind identity CLAMPs) or a copy."""
    last = [op for op in ops if not is_identity_clamp(op)]
    if not last:
        return False
    op = last[-1]
    if op.op in COPIES:
        return True
    return op.op == "RESCALE" and op.output.dtype.name == "int8" and not op.output_unsigned


def reads_offset(ops: list, name: str) -> bool:
    """Whether the layer reads input ``name`` offset-binary without a conversion."""
    readers = [op for op in ops if any(t.name == name for t in op.inputs)]
    return all(op.op == "RESCALE" and not op.input_unsigned and op.input.name == name
               or op.op in COPIES for op in readers)


def _feeds_root(ops: list, op: Operator, root: str) -> bool:
    """Whether ``op``'s result is the layer's output, possibly through folded CLAMPs."""
    name = op.output.name
    for later in ops[ops.index(op) + 1:]:
        if later.inputs[0].name == name and is_identity_clamp(later):
            name = later.output.name
    return name == root
