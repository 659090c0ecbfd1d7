"""``.tosa`` flatbuffers: read one into a ``Graph``, write a ``Graph`` back.

Reading uses the flatbuffer classes generated from the TOSA schema (the ``tosa`` package that
tosa-tools installs); writing goes through the serialization library's Python binding
(``tosa_serializer``), so the files are exactly what tosa-tools itself writes (TOSA 1.1 draft
version stamp, accepted by the reference model). Attribute fields come from the schema
(``hwsim.tosa.schema``): no field is listed here. The main basic block of the first region is
the graph; CONST and CONST_SHAPE operators become constant tensors and are written again.
Not supported: control-flow sub-graphs, variables, unranked tensors, constants kept in
separate files.
"""

from __future__ import annotations

import functools
import importlib
import struct

import numpy as np

from hwsim.errors import TosaError
from hwsim.tosa.dtypes import BY_ENUM, DType, dtype, from_bytes
from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.pending import Pending, build_graph, fix_batch
from hwsim.tosa.schema import Field, schema


def _str(value) -> str:
    return value.decode() if isinstance(value, bytes) else (value or "")


def _vector(table, field: Field) -> np.ndarray:
    array = getattr(table, field.method + "AsNumpy")()
    return np.zeros(0, np.uint8) if isinstance(array, int) else array   # absent -> 0


@functools.lru_cache(maxsize=None)
def _table_class(name: str):
    return getattr(importlib.import_module(f"tosa.{name}"), name)


def _read_attributes(op_name: str, fb_op, where: str, input_dtype: DType | None) -> dict:
    sch = schema()
    fields = sch.fields(op_name)
    if not fields:
        return {}
    kind = fb_op.AttributeType()
    expected = sch.attribute_table(op_name)
    if kind < 1 or sch.union[kind - 1] != expected:
        found = sch.union[kind - 1] if 0 < kind <= len(sch.union) else "none"
        raise TosaError(where, f"attribute table is {found}, expected {expected}")
    table = _table_class(expected)()
    raw = fb_op.Attribute()
    table.Init(raw.Bytes, raw.Pos)
    attrs = {}
    for field in fields:
        if field.type == "[ubyte]":
            data = _vector(table, field).tobytes()
            attrs[field.name] = (_scalar(input_dtype, data, where) if op_name == "CLAMP"
                                 else data)
        elif field.type.startswith("["):
            attrs[field.name] = [int(v) for v in _vector(table, field)]
        elif field.type == "string":
            attrs[field.name] = _str(getattr(table, field.method)())
        elif field.type in sch.enums:
            value = sch.enums[field.type][getattr(table, field.method)()]
            attrs[field.name] = BY_ENUM[value].name if field.type == "DType" else value
        else:
            attrs[field.name] = getattr(table, field.method)()
    return attrs


def _scalar(dt: DType | None, data: bytes, where: str):
    if dt is None or len(data) < dt.np.itemsize:
        raise TosaError(where, f"min_val/max_val hold {len(data)} bytes, expected a {dt} value")
    return np.frombuffer(data[:dt.np.itemsize], dtype=dt.np)[0].item()


def _read_tensor(fb, where: str) -> Tensor:
    name = _str(fb.Name())
    if fb.IsUnranked() or fb.Variable():
        raise TosaError(where, f"tensor {name} is unranked or a variable (not supported)")
    type_name = schema().enums["DType"][fb.Type()]
    if type_name not in BY_ENUM:
        raise TosaError(where, f"tensor {name} has element type {type_name} (not supported)")
    dt = BY_ENUM[type_name]
    shape = [int(d) for d in fb.ShapeAsNumpy()] if fb.ShapeLength() else []
    data = None
    if fb.DataLength():
        if any(d < 1 for d in shape):
            raise TosaError(where, f"constant {name} has a dynamic shape {shape}")
        data = from_bytes(dt, fb.DataAsNumpy().tobytes(), tuple(shape))
    return Pending(name, shape, dt, data)


def read_tosa(data: bytes, source: str = "<bytes>", batch: int | None = None) -> Graph:
    """Parse a ``.tosa`` flatbuffer, 1.x or 0.80.x (recognised by its version table; 0.80 is
    upgraded to 1.0 by ``hwsim.tosa.v080``). ``batch`` fixes a dynamic (-1) leading
    dimension."""
    from tosa.TosaGraph import TosaGraph
    if len(data) < 8 or data[4:8] != b"TOSA":
        raise TosaError(source, "not a TOSA flatbuffer (no 'TOSA' file identifier)")
    try:      # the version table is slot 0 of the root in every TOSA schema
        root = TosaGraph.GetRootAs(data, 0)
        v = root.Version()
        major, minor, patch, draft = v._Major(), v._Minor(), v._Patch(), v._Draft()
    except (IndexError, ValueError, TypeError, AttributeError, struct.error) as exc:
        raise TosaError(source, f"corrupt flatbuffer: {exc or 'no version table'}") from None
    version = f"{major}.{minor}.{patch}" + ("-draft" if draft else "")
    if (major, minor) == (0, 80):
        from hwsim.tosa.v080.flatbuf import read_080
        from hwsim.tosa.v080.upgrade import upgrade
        return upgrade(read_080(data, source), source, batch)
    if major != 1:
        raise TosaError(source, f"TOSA version {version}; hwsim reads 0.80.x and 1.x files")
    try:
        if root.RegionsLength() != 1 or root.Regions(0).BlocksLength() != 1:
            raise TosaError(source, "several regions or blocks (control flow is not supported)")
        return _read_block(root.Regions(0).Blocks(0), source, batch, version)
    except (IndexError, ValueError, UnicodeDecodeError, struct.error,    # truncated or corrupt:
            AttributeError, TypeError, KeyError, OverflowError) as exc:   # offsets gone astray
        raise TosaError(source, f"corrupt flatbuffer: {type(exc).__name__}: {exc}") from None


def _read_block(block, source: str, batch: int | None, version: str) -> Graph:
    pending = {}
    for i in range(block.TensorsLength()):
        t = _read_tensor(block.Tensors(i), source)
        pending[t.name] = t
    for i in range(block.ShapesLength()):
        s = block.Shapes(i)
        values = s.DataAsNumpy().tobytes() if s.DataLength() else b""
        shape = from_bytes(dtype("shape"), values, (s.Rank(),)) if values or not s.Rank() \
            else None
        pending[_str(s.Name())] = Pending(_str(s.Name()), [s.Rank()], dtype("shape"), shape)
    raw_ops = []
    for i in range(block.OperatorsLength()):
        fb = block.Operators(i)
        name = schema().ops[fb.Op()]
        ins = [_str(fb.Inputs(j)) for j in range(fb.InputsLength())]
        outs = [_str(fb.Outputs(j)) for j in range(fb.OutputsLength())]
        where = f"{source}: operator {i} ({name})"
        for tensor in ins + outs:
            if tensor not in pending:
                raise TosaError(where, f"refers to tensor {tensor!r}, which the block does "
                                       "not declare")
        first = pending[ins[0]].dtype if ins else None
        raw_ops.append((name, ins, outs, _read_attributes(name, fb, where, first)))
    inputs = [_str(block.Inputs(i)) for i in range(block.InputsLength())]
    outputs = [_str(block.Outputs(i)) for i in range(block.OutputsLength())]
    for name in inputs + outputs:
        if name not in pending:
            raise TosaError(source, f"graph input/output {name!r} is not a declared tensor")
    if batch is not None:
        fix_batch(pending, raw_ops, batch, source)
    return build_graph(pending, raw_ops, inputs, outputs, _str(block.Name()) or "main", source,
                       version)


def write_tosa(graph: Graph) -> bytes:
    """The graph as a ``.tosa`` flatbuffer (constants embedded)."""
    import tosa_serializer as ts
    ser = ts.TosaSerializer("")
    block = ser.currRegion.currBasicBlock
    for t in graph.inputs:
        ser.addInputTensor(ts.TosaSerializerTensor(t.name, list(t.shape), _ts_dtype(t.dtype)))
    written = {t.name for t in graph.inputs}
    for op in graph:
        for t in op.inputs + op.outputs:
            if t.name in written:
                continue
            written.add(t.name)
            if t.is_const:
                ser.addConst(list(t.shape), _ts_dtype(t.dtype), t.data, t.name)
            else:
                block.addTensor(t.name, list(t.shape), _ts_dtype(t.dtype))
        attr = ts.TosaSerializerAttribute()
        fields = schema().fields(op.op)
        getattr(attr, schema().attribute_table(op.op))(
            *(_ts_value(op, f, op.attrs[f.name]) for f in fields))
        block.addOperator(getattr(ts.Op, op.op), [t.name for t in op.inputs],
                          [t.name for t in op.outputs], attr)
    for t in graph.outputs:
        if t.name not in written:                       # a constant graph output
            ser.addConst(list(t.shape), _ts_dtype(t.dtype), t.data, t.name)
        block.addOutput(t.name)
    return ser.serialize()


def _ts_dtype(dt: DType):
    import tosa_serializer as ts
    return getattr(ts.DType, dt.enum)


def _ts_value(op: Operator, field: Field, value):
    import tosa_serializer as ts
    if field.type == "DType":
        return _ts_dtype(dtype(value))
    if field.type in schema().enums:
        return getattr(getattr(ts, field.type), value)
    if field.type == "[ubyte]":
        raw = value if isinstance(value, (bytes, bytearray)) else \
            np.asarray(value, dtype=op.inputs[0].dtype.np).reshape(1).tobytes()
        return list(raw) + [0] * (-len(raw) % 8)        # the schema aligns these to 8 bytes
    return value
