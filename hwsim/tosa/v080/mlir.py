"""TOSA 0.80 MLIR text to and from the 0.80 form (``hwsim.tosa.v080.form``).

The tosa dialect as LLVM 17-18 printed it: one ``func.func`` whose arguments are the graph
inputs and whose ``return`` gives the outputs; operators in custom (``tosa.conv2d %a, %b, %c
{...} : (...) -> ...``) or generic form (``"tosa.const"() <{value = ...}> : () -> ...``);
zero points in ``quantization_info = #tosa.conv_quant<input_zp = .., weight_zp = ..>`` (also
``unary_quant``, ``matmul_quant``, ``pad_quant``); RESCALE, CLAMP, RESHAPE, SLICE, TILE, RESIZE
and MUL parameters as attributes; TRANSPOSE ``perms``, PAD ``padding``/``pad_const`` and TABLE
contents as constant operands (the 0.80 serializer turned those into attributes, and so does
this reader). Element types ``i1 i4 i8 i16 i32 i48 f16 bf16 f32 ui8 ui16``, quantised types as
their storage type. Tensor names come from ``loc("name")`` where present (the writer emits
them, so names survive a round trip), else from the SSA names. Constants are ``dense<...>``
literals (lists, splats or hex). Not supported: several functions, regions (control flow),
``dense_resource`` blobs, unranked tensors. Errors name the file, line and what was found.
"""

from __future__ import annotations

import re

import numpy as np

from hwsim.errors import TosaError
from hwsim.tosa.dtypes import BY_ENUM
from hwsim.tosa.v080.form import Graph080, Op080, Tensor080
from hwsim.tosa.v080.schema import ATTRIBUTE_OF, schema

ELEMENT = {"i1": "BOOL", "i4": "INT4", "i8": "INT8", "i16": "INT16", "i32": "INT32",
           "i48": "INT48", "f16": "FP16", "bf16": "BF16", "f32": "FP32", "ui8": "UINT8",
           "u8": "UINT8", "ui16": "UINT16", "u16": "UINT16"}
MLIR_TYPE = {v: k for k, v in ELEMENT.items() if not k.startswith("u")} | \
    {"UINT8": "ui8", "UINT16": "ui16"}
NP = {"UINT8": np.uint8, "UINT16": np.uint16}
OP_NAMES = {"int_div": "INTDIV"}                         # mlir name -> 0.80 Op, when not upper()
MLIR_NAMES = {v: k for k, v in OP_NAMES.items()}
QUANT = {"input_zp": ("input_zp",), "weight_zp": ("weight_zp",), "output_zp": ("output_zp",),
         "a_zp": ("a_zp",), "b_zp": ("b_zp",)}
RESIZE_MODES = {"NEAREST_NEIGHBOR": "NEAREST", "NEAREST": "NEAREST", "BILINEAR": "BILINEAR"}
# Where the printed dialect differs between LLVM releases (the reader takes either): the
# element type of RESCALE's shift array and of MUL's shift (checked with the MLIR parsers of
# iree-compiler 20231004 and 20240226, which TensorFlow 2.15 and 2.16 match).
DIALECTS = {"llvm17": {"rescale_shift": "i32", "mul_shift": "i32"},
            "llvm18": {"rescale_shift": "i8", "mul_shift": "i8"}}


def _np(kind: str):
    return NP.get(kind) or BY_ENUM[kind].np


STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
SPACE = re.compile(r"(?:\s+|//[^\n]*)+")


class MlirError(Exception):
    pass


class _Text:
    """A cursor over the text with the few MLIR lexical rules the dialect needs."""

    def __init__(self, text: str):
        self.s, self.i = text, 0

    def line(self) -> int:
        return self.s.count("\n", 0, self.i) + 1

    def ws(self) -> None:
        m = SPACE.match(self.s, self.i)
        if m:
            self.i = m.end()

    def peek(self, token: str) -> bool:
        self.ws()
        return self.s.startswith(token, self.i)

    def accept(self, token: str) -> bool:
        if self.peek(token):
            self.i += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.accept(token):
            raise MlirError(f"expected {token!r}, found {self.s[self.i:self.i + 20]!r}")

    def match(self, pattern: str, what: str) -> str:
        self.ws()
        m = re.compile(pattern).match(self.s, self.i)
        if not m:
            raise MlirError(f"expected {what}, found {self.s[self.i:self.i + 20]!r}")
        self.i = m.end()
        return m.group(0)

    def balanced(self, close: str = ">") -> str:
        """The text between an opening bracket (already consumed) and its match."""
        start, stack = self.i, [close]
        pairs = {"<": ">", "(": ")", "[": "]", "{": "}"}
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == '"':
                self.i = self._string_end(self.i)
                continue
            if c == ">" and self.s[self.i - 1] == "-":      # an arrow, not a bracket
                pass
            elif c == stack[-1]:
                stack.pop()
                if not stack:
                    self.i += 1
                    return self.s[start:self.i - 1]
            elif c in pairs:
                stack.append(pairs[c])
            self.i += 1
        raise MlirError(f"no closing {close!r}")

    def _string_end(self, i: int) -> int:
        m = STRING.match(self.s, i)
        if not m:
            raise MlirError("unterminated string")
        return m.end()

    def string(self) -> str:
        self.ws()
        if not self.s.startswith('"', self.i):
            raise MlirError(f"expected a string, found {self.s[self.i:self.i + 20]!r}")
        end = self._string_end(self.i)
        value = self.s[self.i + 1:end - 1]
        self.i = end
        return value.encode().decode("unicode_escape")


# -- types and attribute values ---------------------------------------------------------------

def _type(p: _Text) -> tuple[list[int], str]:
    """A tensor type -> (shape, 0.80 DType name); ``?`` dimensions are -1."""
    p.expect("tensor")
    p.expect("<")
    body = p.balanced()
    if body.startswith("*"):
        raise MlirError(f"unranked tensor<{body}> is not supported")
    parts = re.match(r"((?:[0-9?]+x)*)(.*)", body)
    dims = [-1 if d == "?" else int(d) for d in parts.group(1).split("x") if d]
    return dims, _element(parts.group(2).strip())


def _element(text: str) -> str:
    quant = re.match(r"!quant\.uniform<([a-z]+\d+)", text)
    name = quant.group(1) if quant else text
    if name not in ELEMENT:
        raise MlirError(f"element type {text!r} is not a TOSA 0.80 type")
    return ELEMENT[name]


def _value(p: _Text):
    """One attribute value as a Python value (dense: (text, shape, type))."""
    p.ws()
    if p.accept("array<"):
        body = p.balanced()
        _, _, items = body.partition(":")
        return [int(v) for v in items.replace(",", " ").split()]
    if p.accept("dense_resource<"):
        raise MlirError("dense_resource constants are not supported (print with "
                        "--mlir-print-elementsattrs-with-hex-if-larger or inline them)")
    if p.accept("dense<"):
        body = p.balanced()
        p.expect(":")
        shape, kind = _type(p)
        return ("dense", body, shape, kind)
    if p.accept("#tosa."):
        p.match(r"[\w]+", "a quantization attribute")
        p.expect("<")
        inner = _Text(p.balanced())
        out = {}
        while True:
            inner.ws()
            if inner.i >= len(inner.s):
                return out
            key = inner.match(r"\w+", "a field name")
            inner.expect("=")
            out[key] = int(inner.match(r"-?\d+", "an integer"))
            inner.accept(",")
    if p.peek('"'):
        return p.string()
    if p.accept("["):
        items = []
        while not p.accept("]"):
            items.append(_value(p))
            p.accept(",")
        return items
    if p.peek("true") or p.peek("false"):
        return p.match(r"true|false", "a bool") == "true"
    number = re.compile(r"[-+]?(0x[0-9A-Fa-f]+|\d+(\.\d*)?([eE][-+]?\d+)?|inf|nan)")
    p.ws()
    if number.match(p.s, p.i):
        text = p.match(number.pattern, "a number")
        kind = None
        if p.accept(":"):
            kind = p.match(r"[a-z]+\d+", "a type")
        return _scalar(text, kind)
    return p.match(r"[!#]?[\w.]+", "an attribute value")      # a type (acc_type = i32), ...


def _scalar(text: str, kind: str | None):
    if kind in ("f16", "bf16", "f32", "f64") and text.lower().startswith(("0x", "-0x")):
        bits = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}[kind]
        return float(np.array(int(text, 16), bits).view(_np(ELEMENT[kind])
                                                        if kind != "f64" else np.float64))
    if kind and kind.startswith("f") or re.search(r"[.eEn]", text) and "0x" not in text:
        return float(text)
    return int(text, 0)


def _attr_dict(p: _Text, close: str = "}") -> dict:
    out = {}
    while not p.accept(close):
        key = p.match(r"[\w.$]+|\"[^\"]*\"", "an attribute name").strip('"')
        out[key] = _value(p) if p.accept("=") else True
        p.accept(",")
    return out


def _dense(value, where: str) -> np.ndarray:
    """A ``dense<...>`` literal as an array of its type."""
    _, body, shape, kind = value
    if -1 in shape:
        raise MlirError(f"constant with a dynamic shape {shape}")
    count = int(np.prod(shape, dtype=np.int64))
    np_type = np.dtype(_np(kind))
    body = body.strip()
    if body.startswith('"0x'):
        raw = bytes.fromhex(body[3:-1])
        width = 1 if kind in ("BOOL", "INT4") else (6 if kind == "INT48" else np_type.itemsize)
        values = _from_raw(raw, kind, np_type, width)
    else:
        tokens = re.findall(r"true|false|[-+]?0x[0-9A-Fa-f]+|[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?"
                            r"|inf|nan)", body)
        kind_name = MLIR_TYPE.get(kind, "i32")
        values = np.array([_scalar(t, kind_name) if t not in ("true", "false") else t == "true"
                           for t in tokens], dtype=np.float64 if np_type.kind == "f" else object)
        values = values.astype(np_type)
    if values.size == 1 and count != 1:
        values = np.full(count, values.reshape(-1)[0], np_type)       # a splat
    if values.size != count:
        raise MlirError(f"dense literal has {values.size} values, tensor<{shape}> needs {count}")
    return values.reshape(shape)


def _from_raw(raw: bytes, kind: str, np_type, width: int) -> np.ndarray:
    if kind == "INT48":
        wide = np.frombuffer(raw, np.uint8).reshape(-1, 6)
        full = np.zeros((len(wide), 8), np.uint8)
        full[:, :6] = wide
        full[:, 6:] = np.where(wide[:, 5:6] >= 0x80, 0xFF, 0)
        return full.view("<i8").reshape(-1)
    if width == 1 and kind in ("BOOL", "INT4"):
        return np.frombuffer(raw, np.int8).astype(np_type)
    return np.frombuffer(raw, np.dtype(np_type).newbyteorder("<")).astype(np_type)


# -- the graph ----------------------------------------------------------------------------------

class _Reader:
    def __init__(self, text: str, source: str):
        self.p, self.source = _Text(text), source
        self.tensors: dict[str, Tensor080] = {}
        self.values: dict[str, str] = {}            # SSA value -> tensor name
        self.ops: list[Op080] = []
        self.locs = dict(re.findall(r'^(#loc\d*)\s*=\s*loc\("([^"]*)"', text, re.M))
        self.line = 1                               # where the statement being read starts

    def read(self) -> Graph080:
        p = self.p
        p.ws()
        self.line = p.line()
        p.s = re.sub(r"(?m)^#[^\n]*$", "", p.s)       # attribute and location aliases
        if p.accept("module"):
            if p.accept("attributes"):
                p.expect("{")
                _attr_dict(p)
            p.expect("{")
        p.expect("func.func")
        name = p.match(r"@[\w.$\-]+", "a function name")[1:]
        inputs = self._arguments()
        if p.accept("->"):
            self._result_types()
        if p.accept("attributes"):
            p.expect("{")
            _attr_dict(p)
        p.expect("{")
        while True:
            p.ws()
            self.line = p.line()
            if p.accept("return") or p.accept("func.return"):
                outputs = self._return()
                break
            self._operation()
        p.expect("}")
        if p.peek("func.func"):
            raise MlirError("several functions (only one graph per file is supported)")
        return Graph080(self.tensors, self.ops, inputs, outputs, name, (0, 80))

    def _arguments(self) -> list[str]:
        p, names = self.p, []
        p.expect("(")
        while not p.accept(")"):
            ssa = p.match(r"%[\w.$\-]+", "an argument")
            p.expect(":")
            shape, kind = _type(p)
            if p.accept("{"):
                _attr_dict(p)
            names.append(self._define(ssa, shape, kind, self._loc()))
            p.accept(",")
        return names

    def _result_types(self) -> None:
        p = self.p
        if p.accept("("):
            while not p.accept(")"):
                _type(p)
                if p.accept("{"):
                    _attr_dict(p)
                p.accept(",")
        else:
            _type(p)

    def _loc(self) -> str | None:
        p = self.p
        if not p.accept("loc("):
            return None
        body = p.balanced(")").strip()
        if body.startswith('"'):
            return re.match(r'"([^"]*)"', body).group(1)
        return self.locs.get(body)

    def _define(self, ssa: str, shape, kind: str, loc: str | None) -> str:
        name = loc or ssa[1:]
        base, n = name, 1
        while name in self.tensors:
            name, n = f"{base}_{n}", n + 1
        self.tensors[name] = Tensor080(name, list(shape), kind)
        self.values[ssa] = name
        return name

    def _use(self, ssa: str) -> str:
        if ssa not in self.values:
            raise MlirError(f"use of undefined value {ssa}")
        return self.values[ssa]

    def _operation(self) -> None:
        p = self.p
        results = [p.match(r"%[\w.$\-]+", "a result")]
        while p.accept(","):
            results.append(p.match(r"%[\w.$\-]+", "a result"))
        p.expect("=")
        generic = p.peek('"')
        name = p.string() if generic else p.match(r"[\w.]+", "an operation name")
        operands, attrs = [], {}
        if generic:
            p.expect("(")
            while not p.accept(")"):
                operands.append(p.match(r"%[\w.$\-#]+", "an operand"))
                p.accept(",")
            if p.accept("<{"):
                attrs.update(_attr_dict(p, "}>"))
            if p.accept("{"):
                attrs.update(_attr_dict(p))
        elif name == "arith.constant":
            value = _value(p)
            attrs["value"] = value
        else:
            while p.peek("%"):
                operands.append(p.match(r"%[\w.$\-#]+", "an operand"))
                p.accept(",")
            if p.accept("{"):
                attrs.update(_attr_dict(p))
        if name != "arith.constant":
            p.expect(":")
            out_types = self._functional_type()
        else:
            out_types = [(value[2], value[3])] if isinstance(value, tuple) else []
        loc = self._loc()
        if len(results) != len(out_types) or len(results) != 1:
            raise MlirError(f"{name} has {len(results)} results and {len(out_types)} result "
                            "types (one is supported)")
        self._add(name, operands, attrs, results[0], out_types[0], loc)

    def _functional_type(self) -> list:
        p = self.p
        p.expect("(")
        while not p.accept(")"):
            _type(p) if p.peek("tensor") else p.match(r"[!\w.<>]+", "a type")
            p.accept(",")
        p.expect("->")
        if p.accept("("):
            types = []
            while not p.accept(")"):
                types.append(_type(p))
                p.accept(",")
            return types
        return [_type(p)]

    def _add(self, name, operands, attrs, result, out_type, loc) -> None:
        if not name.startswith("tosa.") and name != "arith.constant":
            raise MlirError(f"operation {name} is not in the tosa dialect")
        short = name[5:] if name.startswith("tosa.") else "const"
        inputs = [self._use(v) for v in operands]
        out = self._define(result, *out_type, loc)
        if short == "const":
            self.tensors[out].data = _dense(attrs.get("value") or attrs.get("values"), name)
            return
        op = OP_NAMES.get(short, short.upper())
        if op not in schema().ops or op in ("CONST", "UNKNOWN", "RESERVED"):
            raise MlirError(f"unknown operator {name}")
        label = f"{op}[{out}]"
        try:
            inputs, table = _attributes(op, inputs, attrs, self.tensors)
        except KeyError as exc:
            raise MlirError(f"{label}: missing attribute {exc}") from None
        except MlirError as exc:
            raise MlirError(f"{label}: {exc}") from None
        self.ops.append(Op080(op, inputs, [out], table))

    def _return(self) -> list[str]:
        p, outs = self.p, []
        while p.peek("%"):
            outs.append(self._use(p.match(r"%[\w.$\-#]+", "a return value")))
            p.accept(",")
        if outs:
            p.expect(":")
            while True:
                _type(p)
                if not p.accept(","):
                    break
        self._loc()
        return outs


def _constant(name: str, tensors: dict) -> np.ndarray:
    data = tensors[name].data
    if data is None:
        raise MlirError(f"operand {name} must be a constant (0.80 takes it as an attribute)")
    return data


def _attributes(op: str, inputs: list[str], attrs: dict, tensors: dict) -> tuple[list, dict]:
    """(data inputs, the 0.80 attribute table) of one MLIR operation."""
    quant = attrs.pop("quantization_info", {})
    table = {}
    for field in schema().tables[ATTRIBUTE_OF[op]] if op in ATTRIBUTE_OF else ():
        table[field.name] = _field(op, field, attrs, quant)
    if op == "NEGATE":
        table["input1_zp"] = quant.get("input_zp", 0)
    if op == "TRANSPOSE":
        table["perms"] = [int(v) for v in _constant(inputs.pop(1), tensors).reshape(-1)]
    if op == "TABLE":
        table["table"] = [int(v) for v in _constant(inputs.pop(1), tensors).reshape(-1)]
    if op == "PAD":
        table["padding"] = [int(v) for v in _constant(inputs[1], tensors).reshape(-1)]
        kind = tensors[inputs[0]].dtype
        if len(inputs) > 2:
            value = _constant(inputs[2], tensors).reshape(-1)[0]
        else:
            value = quant.get("input_zp", 0)
        if kind in ("FP16", "BF16", "FP32"):
            table["pad_const_fp"] = np.float32(value).tobytes()
        else:
            table["pad_const_int"] = int(value)
        inputs = inputs[:1]
    if op == "RESIZE":
        table["mode"] = RESIZE_MODES.get(str(table["mode"]), table["mode"])
    if op == "CLAMP":
        table.update(min_fp=np.float32(attrs.get("min_fp", 0.0)).tobytes(),
                     max_fp=np.float32(attrs.get("max_fp", 0.0)).tobytes())
    if op == "AVG_POOL2D":
        table["accum_dtype"] = ELEMENT.get(str(attrs.get("acc_type", "")), "UNKNOWN")
    return inputs, table


def _field(op: str, field, attrs: dict, quant: dict):
    if field.name in quant:
        return quant[field.name]
    if field.name == "output_shape" and "out_shape" in attrs:
        return attrs["out_shape"]
    if field.name in attrs:
        value = attrs[field.name]
        return [int(v) for v in value] if isinstance(value, list) else value
    if field.type == "bool":
        return False
    if field.type.startswith("["):
        return b"" if field.type == "[ubyte]" else []
    if field.type in schema().enums:
        return "UNKNOWN"
    return 0


# -- writing ------------------------------------------------------------------------------------

def parse_080(data: "bytes | str", source: str) -> Graph080:
    """The 0.80 form of TOSA 0.80 MLIR text; errors are one line with the line number."""
    text = data.decode(errors="replace") if isinstance(data, bytes) else data
    reader = _Reader(text, source)
    try:
        return reader.read()
    except MlirError as exc:
        raise TosaError(f"{source}:{reader.line}", str(exc)) from None
    except (ValueError, TypeError, IndexError, KeyError, OverflowError) as exc:
        raise TosaError(f"{source}:{reader.line}", f"cannot parse ({type(exc).__name__}: "
                                                   f"{exc})") from None


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
        raw = np.asarray(values, np.dtype(_np(t.dtype)).newbyteorder("<")).tobytes()
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
        return [(f"{out}_table", np.asarray(a["table"], _np(kind)), kind)]
    if op.op == "PAD":
        rank = len(a["padding"]) // 2
        padding = np.asarray(a["padding"], np.int32).reshape(rank, 2)
        value = np.frombuffer(a["pad_const_fp"], np.float32)[0] if a["pad_const_fp"] \
            else a["pad_const_int"]
        return [(f"{out}_padding", padding, "INT32"),
                (f"{out}_pad_const", np.asarray(value, _np(kind)).reshape(()), kind)]
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
