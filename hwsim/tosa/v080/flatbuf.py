"""TOSA 0.80 ``.tosa`` flatbuffers to and from the 0.80 form (``hwsim.tosa.v080.form``).

The tables are decoded and built by ``hwsim.tosa.fbtable`` from the 0.80 schema
(``hwsim.tosa.v080.schema``). CONST operators become constant tensors on reading and are
written again, one per constant, before its first reader (as the 0.80 serialization library
orders them). Written files carry version 0.80.0, not draft. Not supported, as in 1.x files:
several regions or blocks (control flow), variables, unranked tensors.
"""

from __future__ import annotations

import numpy as np

from hwsim.errors import TosaError
from hwsim.tosa.dtypes import BY_ENUM, from_bytes, to_bytes
from hwsim.tosa.fbtable import FlatbufferError, read_table, write_table
from hwsim.tosa.v080.form import VERSION, Graph080, Op080, Tensor080
from hwsim.tosa.v080.schema import ATTRIBUTE_OF, schema

UNSIGNED = {"UINT8": np.uint8, "UINT16": np.uint16}   # 0.80 types that 1.0 does not have


def read_graph(root: dict, source: str) -> Graph080:
    """The 0.80 form of a decoded ``TosaGraph`` table (``read_080`` decodes it)."""
    regions = root["regions"]
    if len(regions) != 1 or len(regions[0]["blocks"]) != 1:
        raise TosaError(source, "several regions or blocks (control flow is not supported)")
    block = regions[0]["blocks"][0]
    tensors = {}
    for fb in block["tensors"]:
        t = _tensor(fb, source)
        tensors[t.name] = t
    ops = []
    for i, fb in enumerate(block["operators"]):
        where = f"{source}: operator {i} ({fb['op']})"
        for name in fb["inputs"] + fb["outputs"]:
            if name not in tensors:
                raise TosaError(where, f"refers to tensor {name!r}, which the block does not "
                                       "declare")
        if fb["op"] == "CONST":
            if len(fb["outputs"]) != 1 or tensors[fb["outputs"][0]].data is None:
                raise TosaError(where, f"CONST {fb['outputs']} has no embedded data")
            continue
        attrs = _attributes(fb, where)
        ops.append(Op080(fb["op"], list(fb["inputs"]), list(fb["outputs"]), attrs))
    for name in block["inputs"] + block["outputs"]:
        if name not in tensors:
            raise TosaError(source, f"graph input/output {name!r} is not a declared tensor")
    v = root["version"]
    return Graph080(tensors, ops, list(block["inputs"]), list(block["outputs"]),
                    block["name"] or "main", (v["_major"], v["_minor"], v["_patch"]))


def read_080(data: bytes, source: str) -> Graph080:
    """Decode a 0.80 flatbuffer (its version already checked)."""
    try:
        return read_graph(read_table(schema(), data, "TosaGraph"), source)
    except FlatbufferError as exc:
        raise TosaError(source, f"corrupt flatbuffer: {exc}") from None


def _attributes(fb: dict, where: str) -> dict:
    expected = ATTRIBUTE_OF.get(fb["op"])
    found = fb["attribute"]
    if found is None:
        if expected is None:
            return {}
        found = (expected, {})          # absent: every field takes its default
    if found[0] != expected:
        raise TosaError(where, f"attribute table is {found[0]}, expected {expected or 'none'}")
    return {k: (_plain(v)) for k, v in found[1].items()}


def _plain(value):
    if isinstance(value, np.ndarray):
        return [int(v) for v in value]
    return value


def _tensor(fb: dict, source: str) -> Tensor080:
    name, kind = fb["name"], fb["type"]
    if fb["is_unranked"] or fb["variable"]:
        raise TosaError(source, f"tensor {name} is unranked or a variable (not supported)")
    if kind not in BY_ENUM and kind not in UNSIGNED:
        raise TosaError(source, f"tensor {name} has element type {kind} (not supported)")
    shape = [int(d) for d in fb["shape"]]
    data = None
    if fb["data"]:
        if any(d < 1 for d in shape):
            raise TosaError(source, f"constant {name} has a dynamic shape {shape}")
        try:
            data = _decode(kind, fb["data"], shape)
        except TosaError as exc:
            raise TosaError(source, f"constant {name}: {exc.condition}") from None
    return Tensor080(name, shape, kind, data)


def _decode(kind: str, raw: bytes, shape: list[int]) -> np.ndarray:
    if kind in UNSIGNED:
        count = int(np.prod(shape, dtype=np.int64))
        values = np.frombuffer(raw, UNSIGNED[kind])[:count]
        if values.size != count:
            raise TosaError("tensor", f"constant data holds {values.size} values, expected "
                                      f"{count} for shape {shape}")
        return values.reshape(shape)
    return from_bytes(BY_ENUM[kind], raw, tuple(shape))


def _encode(t: Tensor080) -> bytes:
    if t.dtype in UNSIGNED:
        return np.asarray(t.data, UNSIGNED[t.dtype]).tobytes()
    return to_bytes(BY_ENUM[t.dtype], t.data)


def write_080(graph: Graph080) -> bytes:
    """The 0.80 form as a 0.80 ``.tosa`` flatbuffer."""
    tensors, ops, written = [], [], set()

    def declare(name: str) -> None:
        if name in written:
            return
        written.add(name)
        t = graph.tensors[name]
        fb = {"name": t.name, "shape": list(t.shape), "type": t.dtype}
        if t.data is not None:
            fb["data"] = _encode(t)
            ops.append({"op": "CONST", "inputs": [], "outputs": [t.name]})
        tensors.append(fb)

    for name in graph.inputs:
        declare(name)
    for op in graph.ops:
        for name in op.inputs + op.outputs:
            declare(name)
        fb = {"op": op.op, "inputs": op.inputs, "outputs": op.outputs}
        if op.op in ATTRIBUTE_OF:
            fb["attribute"] = (ATTRIBUTE_OF[op.op], op.attrs)
        ops.append(fb)
    for name in graph.outputs:
        declare(name)
    block = {"name": graph.name, "operators": ops, "tensors": tensors,
             "inputs": graph.inputs, "outputs": graph.outputs}
    major, minor, patch = VERSION
    root = {"version": {"_major": major, "_minor": minor, "_patch": patch, "_draft": False},
            "regions": [{"name": "main", "blocks": [block]}]}
    return write_table(schema(), "TosaGraph", root, b"TOSA")
