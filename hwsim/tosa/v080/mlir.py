"""TOSA 0.80 MLIR text read into the 0.80 form (``hwsim.tosa.v080.form``).

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
``hwsim.tosa.v080.mlir_print`` writes the same dialect.
"""

from __future__ import annotations

import re

import numpy as np

from hwsim.errors import TosaError
from hwsim.tosa.dtypes import BY_ENUM, from_bytes
from hwsim.tosa.v080.form import Graph080, Op080, Tensor080
from hwsim.tosa.v080.schema import ATTRIBUTE_OF, schema

ELEMENT = {"i1": "BOOL", "i4": "INT4", "i8": "INT8", "i16": "INT16", "i32": "INT32",
           "i48": "INT48", "f16": "FP16", "bf16": "BF16", "f32": "FP32", "ui8": "UINT8",
           "u8": "UINT8", "ui16": "UINT16", "u16": "UINT16"}
MLIR_TYPE = {v: k for k, v in ELEMENT.items() if not k.startswith("u")} | \
    {"UINT8": "ui8", "UINT16": "ui16"}
NP = {"UINT8": np.uint8, "UINT16": np.uint16}
OP_NAMES = {"int_div": "INTDIV"}                         # mlir name -> 0.80 Op, when not upper()
RESIZE_MODES = {"NEAREST_NEIGHBOR": "NEAREST", "NEAREST": "NEAREST", "BILINEAR": "BILINEAR"}
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
SPACE = re.compile(r"(?:\s+|//[^\n]*)+")
NUMBER = re.compile(r"[-+]?(0x[0-9A-Fa-f]+|\d+(\.\d*)?([eE][-+]?\d+)?|inf|nan)")
LITERAL = re.compile(r"true|false|[-+]?0x[0-9A-Fa-f]+|[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)")


def np_type(kind: str):
    """The numpy type of a 0.80 DType's values."""
    return NP.get(kind) or BY_ENUM[kind].np


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
    p.ws()
    if NUMBER.match(p.s, p.i):
        text = p.match(NUMBER.pattern, "a number")
        kind = None
        if p.accept(":"):
            kind = p.match(r"[a-z]+\d+", "a type")
        return _scalar(text, kind)
    return p.match(r"[!#]?[\w.]+", "an attribute value")      # a type (acc_type = i32), ...


def _scalar(text: str, kind: str | None):
    """A number literal; ``0x...`` of a float type is its bit pattern (as MLIR prints NaNs)."""
    float_type = kind is not None and kind.startswith(("f", "bf"))
    if float_type and text.lower().startswith(("0x", "-0x")):
        bits = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}[kind]
        values = np.array(int(text, 16), bits)
        return float(values.view(np.float64 if kind == "f64" else np_type(ELEMENT[kind])))
    if float_type or ("0x" not in text and re.search(r"[.eEn]", text)):
        return float(text)
    return int(text, 0)


def _attr_dict(p: _Text, close: str = "}") -> dict:
    out = {}
    while not p.accept(close):
        key = p.match(r"[\w.$]+|\"[^\"]*\"", "an attribute name").strip('"')
        out[key] = _value(p) if p.accept("=") else True
        p.accept(",")
    return out


def _dense(value) -> np.ndarray:
    """A ``dense<...>`` literal as an array of its type."""
    _, body, shape, kind = value
    if -1 in shape:
        raise MlirError(f"constant with a dynamic shape {shape}")
    count = int(np.prod(shape, dtype=np.int64))
    values_type = np.dtype(np_type(kind))
    body = body.strip()
    if body.startswith('"0x'):
        values = _from_raw(bytes.fromhex(body[3:-1]), kind)
    else:
        tokens = LITERAL.findall(body)
        kind_name = MLIR_TYPE.get(kind, "i32")
        values = np.array([_scalar(t, kind_name) if t not in ("true", "false") else t == "true"
                           for t in tokens],
                          dtype=np.float64 if values_type.kind == "f" else object)
        values = values.astype(values_type)
    if values.size == 1 and count != 1:
        values = np.full(count, values.reshape(-1)[0], values_type)       # a splat
    if values.size != count:
        raise MlirError(f"dense literal has {values.size} values, tensor<{shape}> needs {count}")
    return values.reshape(shape)


def _from_raw(raw: bytes, kind: str) -> np.ndarray:
    """Hex dense data: little-endian values, one byte per i1 or i4 element."""
    if kind == "INT4":
        return np.frombuffer(raw, np.int8)
    if kind in NP:
        return np.frombuffer(raw, np.dtype(NP[kind]).newbyteorder("<")).astype(NP[kind])
    dt = BY_ENUM[kind]
    return from_bytes(dt, raw, (len(raw) // max(1, dt.nbytes(1)),))


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
            self.tensors[out].data = _dense(attrs.get("value") or attrs.get("values"))
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
