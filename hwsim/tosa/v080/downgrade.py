"""TOSA 1.0 -> 0.80: hwsim's graph IR as a 0.80 graph (``form.Graph080``), for writing.

The inverse of ``upgrade``, operator by operator: constant zero points, RESCALE multipliers and
shifts, MUL shifts, TABLE contents, PAD constants and shape inputs become the 0.80 attributes
(a constant shape or zero point input is no 0.80 tensor); ``rounding_mode`` becomes
``double_round``; CLAMP bounds are written both as ``min_int``/``max_int`` and as fp32
``min_fp``/``max_fp``, as 0.80 writers did. Only what 0.80 means the same way is written; a
one-line ``TosaError`` naming the operator refuses the rest: operators and element types 0.80
does not have (COS, SIN, fp8, ...), a non-constant zero point, multiplier, shift or shape,
``INEXACT_ROUND``, ``nan_mode`` IGNORE, ``local_bound``, and the 1.0 fp16-with-fp32-accumulate
and bf16 convolutions (0.80's modes of those types output fp32).
"""

from __future__ import annotations

import numpy as np

from hwsim.errors import TosaError
from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.v080.form import Graph080, Op080, Tensor080
from hwsim.tosa.v080.schema import ATTRIBUTE_OF, schema

ACC_080 = {"int8": "int32", "int16": "int48", "fp16": "fp16", "fp32": "fp32"}
DTYPES_080 = ("BOOL", "INT4", "INT8", "INT16", "INT32", "INT48", "FP32", "FP16", "BF16")


def downgrade(graph: Graph) -> Graph080:
    """The 0.80 form of ``graph``; raises a ``TosaError`` for what 0.80 cannot express."""
    tensors: dict[str, Tensor080] = {}
    ops = []
    for t in graph.inputs:
        tensors[t.name] = _tensor(t, None)
    for op in graph:
        handler = HANDLERS.get(op.op, _plain)
        if op.op not in schema().ops or op.op == "CONST":
            raise op.error("has no TOSA 0.80 form (added in 1.0)")
        new = handler(op)
        for name in new.inputs + new.outputs:
            if name not in tensors:
                tensors[name] = _tensor(graph.tensor(name), op)
        ops.append(new)
    for t in graph.outputs:
        if t.name not in tensors:
            tensors[t.name] = _tensor(t, None)
    return Graph080(tensors, ops, [t.name for t in graph.inputs],
                    [t.name for t in graph.outputs], graph.name)


def _tensor(t: Tensor, op: Operator | None) -> Tensor080:
    if t.dtype.enum not in DTYPES_080:
        where = op.error if op is not None else (lambda text: TosaError(f"tensor {t.name}",
                                                                        text))
        raise where(f"tensor {t.name} is {t.dtype}, which TOSA 0.80 does not have")
    return Tensor080(t.name, list(t.shape), t.dtype.enum, t.data)


def _const(op: Operator, role: str) -> np.ndarray:
    tensor = op.roles()[role]
    if not tensor.is_const:
        raise op.error(f"input {role} ({tensor.name}) is not a constant; TOSA 0.80 takes it "
                       "as an attribute")
    return tensor.data.reshape(-1)


def _int(op: Operator, role: str, unsigned: bool = False) -> int:
    value = int(_const(op, role)[0])
    bits = op.roles()[role].dtype.bits
    return value + (1 << bits) if unsigned and value < 0 else value


def _data(op: Operator, *roles: str) -> list[str]:
    return [op.roles()[r].name for r in roles]


def _check_modes(op: Operator) -> None:
    if op.attrs.get("nan_mode", "PROPAGATE") != "PROPAGATE":
        raise op.error(f"nan_mode {op.attrs['nan_mode']}: TOSA 0.80 always propagates NaN")
    if op.attrs.get("local_bound"):
        raise op.error("local_bound = true has no TOSA 0.80 form")


def _plain(op: Operator, given: dict | None = None) -> Op080:
    _check_modes(op)
    given = dict(op.attrs if given is None else given)
    table = ATTRIBUTE_OF.get(op.op)
    attrs = {}
    for field in schema().tables[table] if table else ():
        if field.name not in given:
            raise op.error(f"no value for the 0.80 attribute {field.name}")
        attrs[field.name] = given[field.name]
    return Op080(op.op, [t.name for t in op.inputs], [t.name for t in op.outputs], attrs)


def _conv(op: Operator) -> Op080:
    _check_modes(op)
    in_t, out_t = op.input.dtype.name, op.output.dtype.name
    if op.acc_type != ACC_080.get(in_t) or (op.input.dtype.is_float and out_t != in_t):
        raise op.error(f"{in_t} -> {out_t} accumulating in {op.acc_type} has no TOSA 0.80 "
                       f"form (0.80 accumulates {in_t} in {ACC_080.get(in_t, 'fp32')} and "
                       "outputs that type)")
    attrs = {"pad": op.pad, "stride": op.stride, "input_zp": _int(op, "input_zp"),
             "weight_zp": _int(op, "weight_zp")}
    if op.op == "TRANSPOSE_CONV2D":
        attrs.update(out_pad=op.out_pad, output_shape=list(op.output.shape))
    else:
        attrs["dilation"] = op.dilation
    return Op080(op.op, _data(op, "input", "weight", "bias"), [op.output.name], attrs)


def _matmul(op: Operator) -> Op080:
    return Op080("MATMUL", _data(op, "A", "B"), [op.output.name],
                 {"a_zp": _int(op, "A_zp"), "b_zp": _int(op, "B_zp")})


def _pool(op: Operator) -> Op080:
    _check_modes(op)
    attrs = {"pad": op.pad, "kernel": op.kernel, "stride": op.stride, "input_zp": 0,
             "output_zp": 0, "accum_dtype": "UNKNOWN"}
    if op.op == "AVG_POOL2D":
        attrs.update(input_zp=_int(op, "input_zp"), output_zp=_int(op, "output_zp"),
                     accum_dtype=op.attrs["acc_type"].upper())
    return Op080(op.op, [op.input.name], [op.output.name], attrs)


def _negate(op: Operator) -> Op080:
    return Op080("NEGATE", [op.input1.name], [op.output.name],
                 {"input1_zp": _int(op, "input1_zp"), "output_zp": _int(op, "output_zp")})


def _mul(op: Operator) -> Op080:
    return Op080("MUL", _data(op, "input1", "input2"), [op.output.name],
                 {"shift": _int(op, "shift")})


def _table(op: Operator) -> Op080:
    return Op080("TABLE", [op.input1.name], [op.output.name],
                 {"table": [int(v) for v in _const(op, "table")]})


def _fp32_bytes(value: float) -> bytes:
    return np.float32(value).tobytes()


def _clamp(op: Operator) -> Op080:
    _check_modes(op)
    low, high = op.min_val, op.max_val
    ints = [int(np.clip(v, -(1 << 31), (1 << 31) - 1)) for v in (low, high)]
    return Op080("CLAMP", [op.input.name], [op.output.name],
                 {"min_int": ints[0], "max_int": ints[1], "min_fp": _fp32_bytes(low),
                  "max_fp": _fp32_bytes(high)})


def _rescale(op: Operator) -> Op080:
    a = op.attrs
    if a["rounding_mode"] == "INEXACT_ROUND":
        raise op.error("rounding_mode INEXACT_ROUND has no TOSA 0.80 form")
    return Op080("RESCALE", [op.input.name], [op.output.name], {
        "input_zp": _int(op, "input_zp", a["input_unsigned"]),
        "output_zp": _int(op, "output_zp", a["output_unsigned"]),
        "multiplier": [int(v) for v in _const(op, "multiplier")],
        "shift": [int(v) for v in _const(op, "shift")], "scale32": a["scale32"],
        "double_round": a["rounding_mode"] == "DOUBLE_ROUND", "per_channel": a["per_channel"],
        "input_unsigned": a["input_unsigned"], "output_unsigned": a["output_unsigned"]})


def _shapes(*fields: str):
    """RESHAPE, SLICE, TILE: constant shape inputs -> the 0.80 attributes."""
    def handler(op: Operator) -> Op080:
        tensors = op.inputs[1:1 + len(fields)]
        if not all(t.is_const for t in tensors):
            raise op.error(f"{'/'.join(fields)} are not constants; TOSA 0.80 takes attributes")
        values = [[int(v) for v in t.data.reshape(-1)] for t in tensors]
        return Op080(op.op, [op.inputs[0].name], [op.output.name], dict(zip(fields, values)))
    return handler


def _pad(op: Operator) -> Op080:
    value = _const(op, "pad_const")[0]
    is_float = op.input1.dtype.is_float
    return Op080("PAD", [op.input1.name], [op.output.name], {
        "padding": [int(v) for v in _const(op, "padding")],
        "pad_const_int": 0 if is_float else int(value),
        "pad_const_fp": _fp32_bytes(float(value)) if is_float else b""})


def _resize(op: Operator) -> Op080:
    new = _shapes("scale", "offset", "border")(op)
    new.attrs["mode"] = op.mode
    return new


HANDLERS = {
    "CONV2D": _conv, "DEPTHWISE_CONV2D": _conv, "CONV3D": _conv, "TRANSPOSE_CONV2D": _conv,
    "MATMUL": _matmul, "AVG_POOL2D": _pool, "MAX_POOL2D": _pool, "NEGATE": _negate,
    "MUL": _mul, "TABLE": _table, "CLAMP": _clamp, "RESCALE": _rescale, "PAD": _pad,
    "RESIZE": _resize, "RESHAPE": _shapes("new_shape"), "SLICE": _shapes("start", "size"),
    "TILE": _shapes("multiples"),
}
