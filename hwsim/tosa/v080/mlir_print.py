"""TOSA 0.80 MLIR text written from the 0.80 form: the dialect as LLVM 18 or 17 printed it.

Operators in custom form with their attributes sorted (as MLIR prints them), zero points in
``#tosa.*_quant`` attributes, TRANSPOSE ``perms``, PAD ``padding``/``pad_const`` and TABLE
contents as constant operands, constants as ``"tosa.const"() {value = dense<...>}`` (hex for
byte-sized element types, exact; lists for i1, i4 and i48; float scalars as bit patterns), and
a ``loc("name")`` on every value so that tensor names survive. ``hwsim.tosa.v080.mlir`` reads
it back.
"""

from __future__ import annotations

import numpy as np

from hwsim.tosa.v080.form import Graph080, Op080, Tensor080
from hwsim.tosa.v080.mlir import MLIR_TYPE, OP_NAMES, np_type

MLIR_NAMES = {v: k for k, v in OP_NAMES.items()}
# Where the printed dialect differs between LLVM releases (the reader takes either): the
# element type of RESCALE's shift array and of MUL's shift (checked with the MLIR parsers of
# iree-compiler 20231004 and 20240226, which TensorFlow 2.15 and 2.16 match).
DIALECTS = {"llvm17": {"rescale_shift": "i32", "mul_shift": "i32"},
            "llvm18": {"rescale_shift": "i8", "mul_shift": "i8"}}


def _mlir_type(t: Tensor080) -> str:
    dims = "".join(f"{d}x" for d in t.shape)
    return f"tensor<{dims}{MLIR_TYPE[t.dtype]}>"


def _dense_text(t: Tensor080) -> str:
    values = np.asarray(t.data).reshape(-1)
    if t.dtype in ("BOOL", "INT4", "INT48") or values.size == 1:
        if t.dtype in ("FP16", "BF16", "FP32"):
            bits = values.view({2: np.uint16, 4: np.uint32}[values.itemsize])
            items = [f"0x{int(b):0{values.itemsize * 2}X}" for b in bits]
        elif t.dtype == "BOOL":
            items = ["true" if v else "false" for v in values]
        else:
            items = [str(int(v)) for v in values]
        body = items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"
        if len(t.shape) > 1 and len(items) > 1:
            body = _nested(items, t.shape)
    else:
        raw = np.asarray(values, np.dtype(np_type(t.dtype)).newbyteorder("<")).tobytes()
        body = f'"0x{raw.hex().upper()}"'
    return f"dense<{body}> : {_mlir_type(t)}"


def _nested(items: list[str], shape: list[int]) -> str:
    if len(shape) == 1:
        return "[" + ", ".join(items) + "]"
    step = len(items) // shape[0]
    return "[" + ", ".join(_nested(items[i:i + step], shape[1:])
                           for i in range(0, len(items), step)) + "]"


def _array(kind: str, values) -> str:
    return f"array<{kind}: {', '.join(str(int(v)) for v in values)}>" if len(values) else \
        f"array<{kind}>"


def _op_text(op: Op080, g: Graph080, consts: list, dialect: dict) -> str:
    """The attribute dict of one operator in the LLVM 17-18 spelling; the attributes the
    dialect takes as constant operands are appended to ``consts``."""
    a = op.attrs
    items: dict[str, str] = {}
    zp = {"CONV2D": "conv", "DEPTHWISE_CONV2D": "conv", "CONV3D": "conv",
          "TRANSPOSE_CONV2D": "conv", "FULLY_CONNECTED": "conv", "AVG_POOL2D": "unary",
          "NEGATE": "unary", "MATMUL": "matmul"}.get(op.op)
    if zp == "conv":
        items["quantization_info"] = (f"#tosa.conv_quant<input_zp = {a['input_zp']}, "
                                      f"weight_zp = {a['weight_zp']}>")
    elif zp == "unary":
        first = a.get("input_zp", a.get("input1_zp"))
        items["quantization_info"] = (f"#tosa.unary_quant<input_zp = {first}, "
                                      f"output_zp = {a['output_zp']}>")
    elif zp == "matmul":
        items["quantization_info"] = (f"#tosa.matmul_quant<a_zp = {a['a_zp']}, "
                                      f"b_zp = {a['b_zp']}>")
    for key in ("pad", "stride", "dilation", "kernel", "out_pad", "new_shape", "start", "size",
                "multiples", "scale", "offset", "border"):
        if key in a and op.op not in ("PAD",):
            items[key] = _array("i64", a[key])
    if op.op == "TRANSPOSE_CONV2D":
        items["out_shape"] = _array("i64", a["output_shape"])
    if op.op == "AVG_POOL2D":
        items["acc_type"] = MLIR_TYPE[a["accum_dtype"]] if a["accum_dtype"] != "UNKNOWN" \
            else "i32"
    if "axis" in a:
        items["axis"] = f"{a['axis']} : i32"
    if op.op == "ARITHMETIC_RIGHT_SHIFT":
        items["round"] = str(a["round"]).lower()
    if op.op == "MUL":
        items["shift"] = f"{a['shift']} : {dialect['mul_shift']}"
    if op.op == "CLAMP":
        low, high = (np.frombuffer(a[k], np.float32)[0] for k in ("min_fp", "max_fp"))
        items.update(max_fp=f"{_float(high)} : f32", max_int=f"{a['max_int']} : i64",
                     min_fp=f"{_float(low)} : f32", min_int=f"{a['min_int']} : i64")
    if op.op == "RESCALE":
        items.update(double_round=str(a["double_round"]).lower(),
                     input_zp=f"{a['input_zp']} : i32",
                     multiplier=_array("i32", a["multiplier"]),
                     output_zp=f"{a['output_zp']} : i32",
                     per_channel=str(a["per_channel"]).lower(),
                     scale32=str(a["scale32"]).lower(),
                     shift=_array(dialect["rescale_shift"], a["shift"]))
        for flag in ("input_unsigned", "output_unsigned"):
            if a[flag]:
                items[flag] = "true"
    if op.op == "RESIZE":
        items["mode"] = f'"{ {"NEAREST": "NEAREST_NEIGHBOR"}.get(a["mode"], a["mode"]) }"'
    if op.op == "FFT2D":
        items["inverse"] = str(a["inverse"]).lower()
    for name, values, kind in _const_operands(op, g):
        consts.append(Tensor080(name, list(values.shape), kind, values))
    return "{" + ", ".join(f"{k} = {v}" for k, v in sorted(items.items())) + "}" if items \
        else ""


def _float(value) -> str:
    return f"0x{np.float32(value).view(np.uint32):08X}" if not np.isfinite(value) else \
        repr(float(value))


def _const_operands(op: Op080, g: Graph080) -> list:
    """The 0.80 attributes the dialect takes as constant operands: (name, values, type)."""
    a, out = op.attrs, op.outputs[0]
    kind = g.tensors[op.inputs[0]].dtype if op.inputs else "INT32"
    if op.op == "TRANSPOSE":
        return [(f"{out}_perms", np.asarray(a["perms"], np.int32), "INT32")]
    if op.op == "TABLE":
        return [(f"{out}_table", np.asarray(a["table"], np_type(kind)), kind)]
    if op.op == "PAD":
        rank = len(a["padding"]) // 2
        padding = np.asarray(a["padding"], np.int32).reshape(rank, 2)
        value = np.frombuffer(a["pad_const_fp"], np.float32)[0] if a["pad_const_fp"] \
            else a["pad_const_int"]
        return [(f"{out}_padding", padding, "INT32"),
                (f"{out}_pad_const", np.asarray(value, np_type(kind)).reshape(()), kind)]
    return []


def print_080(g: Graph080, dialect: str = "llvm18") -> str:
    """TOSA 0.80 MLIR text of the 0.80 form, as LLVM 18 (or 17: ``dialect="llvm17"``)
    printed the dialect, plus ``loc("name")`` on every value so that tensor names survive."""
    spelling = DIALECTS[dialect]
    ssa = {name: f"%arg{i}" for i, name in enumerate(g.inputs)}
    lines, count = [], 0

    def value(name: str) -> str:
        nonlocal count
        ssa[name] = f"%{count}"
        count += 1
        return ssa[name]

    for t in g.tensors.values():
        if t.data is not None:
            lines.append(f'    {value(t.name)} = "tosa.const"() {{value = {_dense_text(t)}}} : '
                         f'() -> {_mlir_type(t)} loc("{t.name}")')
    for op in g.ops:
        consts: list[Tensor080] = []
        attrs = _op_text(op, g, consts, spelling)
        operands = [ssa[n] for n in op.inputs]
        for t in consts:
            operands.append(value(f"{t.name} (operand)"))
            lines.append(f'    {operands[-1]} = "tosa.const"() {{value = {_dense_text(t)}}} :'
                         f' () -> {_mlir_type(t)} loc("{t.name}")')
        ins = ", ".join(_mlir_type(t) for t in [g.tensors[n] for n in op.inputs] + consts)
        out = g.tensors[op.outputs[0]]
        name = MLIR_NAMES.get(op.op, op.op.lower())
        lines.append(f"    {value(out.name)} = tosa.{name} {', '.join(operands)}"
                     f"{' ' + attrs if attrs else ''} : ({ins}) -> {_mlir_type(out)} "
                     f'loc("{out.name}")')
    args = ", ".join(f'{ssa[n]}: {_mlir_type(g.tensors[n])} loc("{n}")' for n in g.inputs)
    results = ", ".join(_mlir_type(g.tensors[n]) for n in g.outputs)
    returned = ", ".join(ssa[n] for n in g.outputs)
    head = f"module {{\n  func.func @{g.name}({args}) -> ({results}) {{\n"
    tail = f"    return {returned} : {results}\n  }}\n}}\n"
    return head + "\n".join(lines) + "\n" + tail
