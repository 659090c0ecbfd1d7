"""TOSA 0.80 -> 1.0: a 0.80 graph (``form.Graph080``) becomes hwsim's validated graph IR.

Each operator is rewritten to its TOSA 1.0 form with the same meaning (the 0.80 and 1.0
specifications compared; docs/sources.md#tosa-080):

- zero points, RESCALE multiplier/shift, MUL shift, TABLE contents: attributes -> constant
  input tensors (zero points of the data's type, multiplier int32/int16 by ``scale32``, shift
  int8); ``double_round`` -> ``rounding_mode`` DOUBLE_ROUND/SINGLE_ROUND;
- RESHAPE ``new_shape``, SLICE ``start``/``size``, TILE ``multiples``, PAD ``padding``, RESIZE
  ``scale``/``offset``/``border``: attributes -> shape inputs; PAD's ``pad_const`` -> a [1]
  tensor; CLAMP's ``min_int``/``max_int`` or ``min_fp``/``max_fp`` -> ``min_val``/``max_val``
  of the input type (an integer bound beyond the type's range clips nothing and is saturated);
- FULLY_CONNECTED -> RESHAPE to [N,1,1,IC], a 1x1 CONV2D (weights [OC,1,1,IC]), RESHAPE back;
- ``acc_type`` as 0.80 implies it (int8 -> int32, int16 -> int48, float: the output type);
  ``nan_mode`` PROPAGATE (0.80 always propagates NaN); ``local_bound`` false;
- 0.80's fp16/bf16 convolutions with an fp32 output accumulate and add the bias in fp32 (1.0's
  fp16/bf16 modes round to the input type instead): inputs and weights are cast to fp32
  (exact) and the operator runs in fp32, which is what 0.80 computes;
- LOGICAL_LEFT/RIGHT_SHIFT of int8/int16: 0.80 allows shifts 0..31 for every type, 1.0 only
  below the type's width, so a shift that is not a constant in that range runs in int32
  (CAST, the shift, CAST back: the same bits);
- uint8/uint16 tensors (0.80 types, read and written only by RESCALE) -> int8/int16 with
  RESCALE's ``input_unsigned``/``output_unsigned``.

ARITHMETIC_RIGHT_SHIFT's final clip in 0.80 has no effect (a rounded right shift cannot leave
the type's range), so it maps one to one. A 0.80 construct with no faithful 1.0 form (control
flow, CUSTOM, DIM and shape arithmetic, RESCALE combinations 1.0 forbids, uint8 data outside
RESCALE) is a one-line ``TosaError`` naming the operator.
"""

from __future__ import annotations

import numpy as np

from hwsim.errors import TosaError
from hwsim.tosa.dtypes import BY_ENUM, DType, cast, dtype
from hwsim.tosa.ir import Graph
from hwsim.tosa.pending import Pending, build_graph, fix_batch
from hwsim.tosa.schema import schema as schema_10
from hwsim.tosa.v080.form import Graph080, Op080
from hwsim.tosa.v080.schema import schema as schema_080

UNSIGNED_AS = {"UINT8": "int8", "UINT16": "int16"}
# 0.80's convolution modes (S1 2.3.3): input type -> output types, and the accumulator a mode
# implies (the output type; int48 for int16). Also FULLY_CONNECTED's, DEPTHWISE_CONV2D's, ...
CONV_MODES = {"int8": ("int32",), "int16": ("int48",), "fp16": ("fp16", "fp32"),
              "bf16": ("fp32",), "fp32": ("fp32",)}
POOL_ACC = {"int8": "int32", "int16": "int32", "bf16": "fp32", "fp32": "fp32"}  # fp16: either
NO_FORM = {
    "COND_IF": "control flow is not supported", "WHILE_LOOP": "control flow is not supported",
    "CUSTOM": "CUSTOM operators are implementation-defined; hwsim cannot run them",
    "DIM": "DIM was removed in TOSA 1.0 (no faithful 1.0 form)",
}


class Upgrade:
    """The 1.0 tensors and operator rows being built from one 0.80 graph."""

    def __init__(self, g: Graph080, source: str, batch: int | None):
        self.pending: dict[str, Pending] = {}
        self.rows: list[tuple] = []
        self.made: dict[tuple, str] = {}     # constants made from attributes, by value
        self.unsigned = {n for n, t in g.tensors.items() if t.dtype in UNSIGNED_AS}
        for t in g.tensors.values():
            kind = UNSIGNED_AS.get(t.dtype) or BY_ENUM[t.dtype].name
            data = t.data
            if data is not None and t.dtype in UNSIGNED_AS:
                data = data.view(dtype(kind).np)          # the same bits, signless
            shape = list(t.shape)
            if batch is not None and -1 in shape:
                if -1 in shape[1:]:
                    raise TosaError(source, f"tensor {t.name} has shape {shape}: only a "
                                            "dynamic batch (leading) dimension can be fixed")
                shape[0] = batch
            self.pending[t.name] = Pending(t.name, shape, dtype(kind), data)

    def dt(self, name: str) -> DType:
        return self.pending[name].dtype

    def shape(self, name: str) -> list[int]:
        return self.pending[name].shape

    def fresh(self, hint: str) -> str:
        name, n = hint, 1
        while name in self.pending:
            name, n = f"{hint}_{n}", n + 1
        return name

    def tensor(self, hint: str, shape, kind: str, data=None) -> str:
        name = self.fresh(hint)
        if data is not None:
            data = np.asarray(data)
        self.pending[name] = Pending(name, list(shape), dtype(kind), data)
        return name

    def const(self, hint: str, kind: str, values, shape=None) -> str:
        """A constant made from an attribute; equal ones are one tensor, as 1.0 converters
        share them (a layer's zero points, a softmax's shifts)."""
        values = cast(dtype(kind), values)           # a TosaError if they do not fit
        shape = list(values.shape if shape is None else shape)
        key = (kind, tuple(shape), values.tobytes())
        if key not in self.made:
            self.made[key] = self.tensor(hint, shape, kind, values.reshape(shape))
        return self.made[key]

    def shape_const(self, hint: str, values) -> str:
        values = [int(v) for v in values]
        return self.const(hint, "shape", values, [len(values)])

    def emit(self, op: str, ins: list[str], outs: list[str], attrs: dict) -> None:
        self.rows.append((op, ins, outs, attrs))


def upgrade(g: Graph080, source: str, batch: int | None = 1) -> Graph:
    """The validated 1.0 graph with the meaning of the 0.80 graph ``g``; ``batch`` fixes a
    dynamic (-1) leading dimension."""
    u = Upgrade(g, source, batch)
    for op in g.ops:
        try:
            _operator(u, op)
        except TosaError as exc:
            label = exc.operator if exc.operator.startswith(op.op) else op.label
            raise TosaError(f"{source}: {label}", exc.condition) from None
        except KeyError as exc:
            raise TosaError(f"{source}: {op.label}", f"missing attribute field {exc}") \
                from None
    if batch is not None:
        fix_batch(u.pending, u.rows, batch, source)
    version = ".".join(map(str, g.version))
    return build_graph(u.pending, u.rows, g.inputs, g.outputs, g.name, source, version)


def error(op: Op080, text: str) -> TosaError:
    return TosaError(op.label, text)


def _operator(u: Upgrade, op: Op080) -> None:
    if op.op in NO_FORM:
        raise error(op, NO_FORM[op.op])
    if op.op not in schema_080().ops or op.op in ("UNKNOWN", "RESERVED", "CONST"):
        raise error(op, "unknown operator for TOSA 0.80")
    if op.op not in HANDLERS and op.op not in schema_10().ops:
        raise error(op, "has no TOSA 1.0 form")
    touched = [n for n in op.inputs + op.outputs if n in u.unsigned]
    if touched and op.op != "RESCALE":
        raise error(op, f"reads or writes {touched[0]} of an unsigned 0.80 type, which TOSA "
                        "1.0 has only as RESCALE's input_unsigned/output_unsigned")
    shapes = [n for n in op.inputs + op.outputs if u.dt(n).kind == "shape"]
    if shapes:
        raise error(op, f"0.80 shape arithmetic ({shapes[0]} is a shape_t) was removed in "
                        "TOSA 1.0 (no faithful 1.0 form)")
    want = ARITY.get(op.op)
    if want is not None and (len(op.inputs), len(op.outputs)) != (want, 1):
        raise error(op, f"has {len(op.inputs)} inputs and {len(op.outputs)} outputs, expected "
                        f"{want} and 1")
    HANDLERS.get(op.op, _plain)(u, op)


def _plain(u: Upgrade, op: Op080, ignore: tuple = ()) -> None:
    """Operators whose 1.0 attributes are the 0.80 ones plus 1.0's new defaults."""
    u.emit(op.op, op.inputs, op.outputs, attributes_10(op, dict(op.attrs), ignore))


def attributes_10(op: Op080, given: dict, ignore: tuple = ()) -> dict:
    """The 1.0 attribute table of ``op.op`` from ``given`` (0.80 names and values), with
    nan_mode PROPAGATE and local_bound false where 0.80 has neither."""
    attrs = {}
    for field in schema_10().fields(op.op):
        if field.name in given:
            attrs[field.name] = given.pop(field.name)
        elif field.name == "nan_mode":
            attrs[field.name] = "PROPAGATE"
        elif field.name == "local_bound":
            attrs[field.name] = False
        else:
            raise error(op, f"no 0.80 value for the 1.0 attribute {field.name}")
    left = sorted(set(given) - set(ignore))
    if left:
        raise error(op, f"0.80 attribute {left[0]} has no place in the 1.0 operator")
    return attrs


def zero_point(u: Upgrade, op: Op080, data: str, value: int, name: str,
               text: str = "in_t") -> str:
    """A [1] zero-point tensor of ``data``'s type, after 0.80's ERROR_IF (zp only for int8)."""
    kind = u.dt(data)
    if kind.name != "int8" and value != 0:
        raise error(op, f"ERROR_IF({text} != i8_t && {name} != 0) with {name} = {value} "
                        "(TOSA 0.80)")
    if kind.is_int and not kind.min <= value <= kind.max:
        raise error(op, f"{name} = {value} does not fit {kind}")
    return u.const(f"{op.outputs[0]}_{name}", kind.name, [value], [1])


def _conv(u: Upgrade, op: Op080) -> None:
    a = dict(op.attrs)
    inp, weight, bias = op.inputs
    out = op.outputs[0]
    acc = conv_mode(u, op)
    inp, weight = _float_inputs(u, op, [inp, weight])
    izp = zero_point(u, op, inp, a.pop("input_zp"), "input_zp")
    wzp = zero_point(u, op, weight, a.pop("weight_zp"), "weight_zp", "weight_t")
    if op.op == "TRANSPOSE_CONV2D":
        want = a.pop("output_shape")
        if want and [int(v) for v in want] != u.shape(out):
            raise error(op, f"output_shape {want} != output {out} shape {u.shape(out)}")
    a["acc_type"] = acc
    u.emit(op.op, [inp, weight, bias, izp, wzp], op.outputs, attributes_10(op, a))


def conv_mode(u: Upgrade, op: Op080) -> str:
    """The accumulator of a 0.80 convolution mode (after the fp32 rewrite for fp16/bf16 ->
    fp32); a pair of types 0.80 does not have is an error."""
    in_t, out_t = u.dt(op.inputs[0]).name, u.dt(op.outputs[0]).name
    if out_t not in CONV_MODES.get(in_t, ()):
        raise error(op, f"{in_t} -> {out_t} is not a TOSA 0.80 {op.op} mode")
    return {"int8": "int32", "int16": "int48"}.get(in_t, out_t)


def _float_inputs(u: Upgrade, op: Op080, names: list[str]) -> list[str]:
    """0.80's fp16/bf16 -> fp32 modes accumulate in fp32: run them in fp32 (module doc)."""
    if u.dt(op.outputs[0]).name != "fp32" or u.dt(names[0]).name not in ("fp16", "bf16"):
        return names
    wide = []
    for name in names:
        t = u.pending[name]
        if t.data is not None:
            wide.append(u.const(f"{name}_fp32", "fp32",
                                np.asarray(t.data, np.float64).astype(np.float32)))
        else:
            wide.append(u.tensor(f"{name}_fp32", t.shape, "fp32"))
            u.emit("CAST", [name], [wide[-1]], {})
    return wide


def _fully_connected(u: Upgrade, op: Op080) -> None:
    inp, weight, bias = op.inputs
    out = op.outputs[0]
    (n, ic), (oc, wic), (n_out, oc_out) = u.shape(inp), u.shape(weight), u.shape(out)
    if wic != ic or (n_out, oc_out) != (n, oc):
        raise error(op, f"input [N,IC] {[n, ic]}, weight [OC,IC] {[oc, wic]} and output "
                        f"[N,OC] {[n_out, oc_out]} disagree")
    acc = conv_mode(u, op)
    inp, weight = _float_inputs(u, op, [inp, weight])
    izp = zero_point(u, op, inp, op.attrs["input_zp"], "input_zp")
    wzp = zero_point(u, op, weight, op.attrs["weight_zp"], "weight_zp", "weight_t")
    x4 = _reshape(u, inp, [n, 1, 1, ic], f"{out}_input")
    w4 = _reshape(u, weight, [oc, 1, 1, ic], f"{out}_weight")
    y4 = u.tensor(f"{out}_conv", [n, 1, 1, oc], u.dt(out).name)
    u.emit("CONV2D", [x4, w4, bias, izp, wzp], [y4],
           {"pad": [0, 0, 0, 0], "stride": [1, 1], "dilation": [1, 1], "local_bound": False,
            "acc_type": acc})
    u.emit("RESHAPE", [y4, u.shape_const(f"{out}_shape", [n, oc])], [out], {})


def _reshape(u: Upgrade, name: str, shape: list[int], hint: str) -> str:
    t = u.pending[name]
    if t.data is not None:
        return u.const(hint, t.dtype.name, t.data.reshape(shape))
    new = u.tensor(hint, shape, t.dtype.name)
    u.emit("RESHAPE", [name, u.shape_const(f"{hint}_shape", shape)], [new], {})
    return new


def _matmul(u: Upgrade, op: Op080) -> None:
    a, b = op.inputs
    azp = zero_point(u, op, a, op.attrs["a_zp"], "A_zp")
    bzp = zero_point(u, op, b, op.attrs["b_zp"], "B_zp")
    u.emit("MATMUL", [a, b, azp, bzp], op.outputs, {})


def _avg_pool(u: Upgrade, op: Op080) -> None:
    a = dict(op.attrs)
    inp = op.inputs[0]
    izp = zero_point(u, op, inp, a.pop("input_zp"), "input_zp")
    ozp = zero_point(u, op, inp, a.pop("output_zp"), "output_zp")
    acc = a.pop("accum_dtype")
    if acc == "UNKNOWN" and u.dt(inp).name not in POOL_ACC:
        raise error(op, f"accum_dtype is not set; a {u.dt(inp)} AVG_POOL2D needs it")
    a["acc_type"] = POOL_ACC[u.dt(inp).name] if acc == "UNKNOWN" else BY_ENUM[acc].name
    u.emit("AVG_POOL2D", [inp, izp, ozp], op.outputs, attributes_10(op, a))


def _max_pool(u: Upgrade, op: Op080) -> None:
    _plain(u, op, ignore=("input_zp", "output_zp", "accum_dtype"))


def _negate(u: Upgrade, op: Op080) -> None:
    inp = op.inputs[0]
    izp = zero_point(u, op, inp, op.attrs["input1_zp"], "input1_zp", "in_out_t")
    ozp = zero_point(u, op, inp, op.attrs["output_zp"], "output_zp", "in_out_t")
    u.emit("NEGATE", [inp, izp, ozp], op.outputs, {})


def _mul(u: Upgrade, op: Op080) -> None:
    shift = op.attrs["shift"]
    if not -128 <= shift <= 127:
        raise error(op, f"shift = {shift} does not fit the 1.0 shift tensor (int8)")
    u.emit("MUL", op.inputs + [u.const(f"{op.outputs[0]}_shift", "int8", [shift], [1])],
           op.outputs, {})


def _table(u: Upgrade, op: Op080) -> None:
    kind = u.dt(op.inputs[0]).name
    values = np.asarray(op.attrs["table"], np.int64)
    if kind == "int8" and values.size and not (-128 <= values.min() <= values.max() <= 127):
        raise error(op, f"int8 table holds {values.min()}..{values.max()}, beyond int8")
    table = u.const(f"{op.outputs[0]}_table", kind, values)
    u.emit("TABLE", [op.inputs[0], table], op.outputs, {})


def _clamp(u: Upgrade, op: Op080) -> None:
    a, kind = op.attrs, u.dt(op.inputs[0])
    if kind.is_float:
        low, high = (_float_bound(op, a[f], kind) for f in ("min_fp", "max_fp"))
    else:
        low, high = a["min_int"], a["max_int"]
        if low > kind.max or high < kind.min:
            raise error(op, f"min_int = {low}, max_int = {high} do not fit {kind}")
        low, high = max(low, kind.min), min(high, kind.max)   # beyond the range: no clip
    u.emit("CLAMP", op.inputs, op.outputs,
           {"min_val": low, "max_val": high, "nan_mode": "PROPAGATE"})


def _float_bound(op: Op080, raw: bytes, kind: DType) -> float:
    """0.80 stores float CLAMP bounds as fp32 bytes (2 bytes: the fp16 value)."""
    if len(raw) not in (2, 4):
        raise error(op, f"min_fp/max_fp hold {len(raw)} bytes, expected an fp32 value")
    value = np.frombuffer(raw, np.float32 if len(raw) == 4 else np.float16)[0]
    return float(np.asarray(value, np.float64).astype(kind.np))


def _rescale(u: Upgrade, op: Op080) -> None:
    a = dict(op.attrs)
    inp, out = op.inputs[0], op.outputs[0]
    iu = a.pop("input_unsigned") or inp in u.unsigned
    ou = a.pop("output_unsigned") or out in u.unsigned
    in_t, out_t = u.dt(inp).name, u.dt(out).name
    wide = ("int32", "int48")       # 1.0 has no unsigned 32/48-bit side (S0 2.13.2)
    for broken, text in ((iu and ou, "input_unsigned && output_unsigned"),
                         (iu and (in_t in wide or out_t == "int32"),
                          f"input_unsigned with {in_t} -> {out_t}"),
                         (ou and (in_t in wide or out_t == "int32"),
                          f"output_unsigned with {in_t} -> {out_t}")):
        if broken:
            raise error(op, f"TOSA 0.80 allows {text}; 1.0 forbids it (no faithful 1.0 form)")
    nc = len(a["multiplier"])
    multiplier = u.const(f"{out}_multiplier", "int32" if a["scale32"] else "int16",
                         _fit(op, a.pop("multiplier"), "int32" if a["scale32"] else "int16"))
    shift = u.const(f"{out}_shift", "int8", _fit(op, a.pop("shift"), "int8"))
    if u.shape(multiplier) != [nc] or u.shape(shift) != [nc]:
        raise error(op, f"multiplier and shift have {nc} and {u.shape(shift)[0]} values")
    izp = u.const(f"{out}_input_zp", in_t, [_signless(a.pop("input_zp"), in_t, iu)], [1])
    ozp = u.const(f"{out}_output_zp", out_t, [_signless(a.pop("output_zp"), out_t, ou)], [1])
    a["rounding_mode"] = "DOUBLE_ROUND" if a.pop("double_round") else "SINGLE_ROUND"
    a.update(input_unsigned=iu, output_unsigned=ou)
    u.emit("RESCALE", [inp, multiplier, shift, izp, ozp], op.outputs, attributes_10(op, a))


def _fit(op: Op080, values, kind: str) -> np.ndarray:
    dt, array = dtype(kind), np.asarray(values, np.int64)
    if array.size and not (dt.min <= array.min() and array.max() <= dt.max):
        raise error(op, f"values {array.min()}..{array.max()} do not fit {kind}")
    return array.astype(dt.np)


def _signless(zp: int, kind: str, unsigned: bool) -> int:
    """An unsigned zero point (0..255, 0 or 32768) as the signless int8/int16 it is stored as."""
    bits = dtype(kind).bits
    if unsigned and kind in ("int8", "int16") and zp >= 1 << (bits - 1):
        return zp - (1 << bits)
    return zp


def _shape_inputs(*fields: str):
    """RESHAPE, SLICE, TILE: shape attributes -> shape inputs (a -1 from the output)."""
    def handler(u: Upgrade, op: Op080) -> None:
        out = u.shape(op.outputs[0])
        ins = [op.inputs[0]]
        for name in fields:
            values = [int(v) for v in op.attrs[name]]
            if -1 in values and name in ("new_shape", "size") and -1 not in out:
                values = [d if v == -1 else v for v, d in zip(values, out)]
            ins.append(u.shape_const(f"{op.outputs[0]}_{name}", values))
        u.emit(op.op, ins, op.outputs, {})
    return handler


def _pad(u: Upgrade, op: Op080) -> None:
    a, inp = op.attrs, op.inputs[0]
    kind = u.dt(inp)
    if kind.is_float:
        value = _float_bound(op, a["pad_const_fp"], kind) if a["pad_const_fp"] else 0.0
    else:
        value = a["pad_const_int"]
        if kind.is_int and not kind.min <= value <= kind.max:
            raise error(op, f"pad_const_int = {value} does not fit {kind}")
    padding = u.shape_const(f"{op.outputs[0]}_padding", a["padding"])
    pad_const = u.const(f"{op.outputs[0]}_pad_const", kind.name, [value], [1])
    u.emit("PAD", [inp, padding, pad_const], op.outputs, {})


def _resize(u: Upgrade, op: Op080) -> None:
    a = op.attrs
    ins = [op.inputs[0]] + [u.shape_const(f"{op.outputs[0]}_{f}", a[f])
                            for f in ("scale", "offset", "border")]
    u.emit("RESIZE", ins, op.outputs, {"mode": a["mode"]})


def _logical_shift(u: Upgrade, op: Op080) -> None:
    """0.80 shifts int8/int16 by 0..31; 1.0 by less than the width (module doc)."""
    value, amount = op.inputs
    kind = u.dt(value)
    shift = u.pending[amount].data
    if kind.name == "int32" or (shift is not None and shift.size and
                                0 <= shift.min() and shift.max() < kind.bits):
        u.emit(op.op, op.inputs, op.outputs, {})
        return
    out = op.outputs[0]
    wide = []
    for name in (value, amount):
        wide.append(u.tensor(f"{out}_{name}_int32", u.shape(name), "int32"))
        u.emit("CAST", [name], [wide[-1]], {})
    if op.op == "LOGICAL_RIGHT_SHIFT":       # 0.80 zero-extends the value from its width
        mask = u.const(f"{out}_mask", "int32", np.full([1] * len(u.shape(value)),
                                                       (1 << kind.bits) - 1, np.int32))
        masked = u.tensor(f"{out}_zero_extended", u.shape(value), "int32")
        u.emit("BITWISE_AND", [wide[0], mask], [masked], {})
        wide[0] = masked
    result = u.tensor(f"{out}_int32", u.shape(out), "int32")
    u.emit(op.op, wide, [result], {})
    u.emit("CAST", [result], [out], {})         # int32 -> int8/int16 keeps the low bits


ARITY = {    # inputs of the 0.80 operators rewritten here (each has one output)
    **dict.fromkeys(("CONV2D", "DEPTHWISE_CONV2D", "CONV3D", "TRANSPOSE_CONV2D",
                     "FULLY_CONNECTED"), 3),
    **dict.fromkeys(("MATMUL", "MUL", "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT"), 2),
    **dict.fromkeys(("AVG_POOL2D", "MAX_POOL2D", "NEGATE", "TABLE", "CLAMP", "RESCALE", "PAD",
                     "RESIZE", "RESHAPE", "SLICE", "TILE"), 1),
}
HANDLERS = {
    "CONV2D": _conv, "DEPTHWISE_CONV2D": _conv, "CONV3D": _conv, "TRANSPOSE_CONV2D": _conv,
    "FULLY_CONNECTED": _fully_connected, "MATMUL": _matmul, "AVG_POOL2D": _avg_pool,
    "MAX_POOL2D": _max_pool, "NEGATE": _negate, "MUL": _mul, "TABLE": _table,
    "CLAMP": _clamp, "RESCALE": _rescale, "PAD": _pad, "RESIZE": _resize,
    "RESHAPE": _shape_inputs("new_shape"), "SLICE": _shape_inputs("start", "size"),
    "TILE": _shape_inputs("multiples"),
    "LOGICAL_LEFT_SHIFT": _logical_shift, "LOGICAL_RIGHT_SHIFT": _logical_shift,
}
