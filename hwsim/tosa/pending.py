"""A graph as a file has it, before it is built: tensors whose dynamic dimensions (-1) are not
yet resolved and operator rows. The 1.x flatbuffer reader (``hwsim.tosa.flatbuf``) and the 0.80
upgrade (``hwsim.tosa.v080.upgrade``) both build their graphs from these."""

from __future__ import annotations

import numpy as np

from hwsim.errors import TosaError
from hwsim.tosa.ir import Graph, Operator, Tensor

CONST_OPS = ("CONST", "CONST_SHAPE")


class Pending:
    """A tensor as the file has it; dynamic dimensions (-1) are resolved before building."""

    def __init__(self, name, shape, dt, data):
        self.name, self.shape, self.dtype, self.data = name, list(shape), dt, data


def fix_batch(pending: dict, raw_ops: list, batch: int, source: str) -> None:
    """Set a dynamic leading dimension (-1) to ``batch``; then resolve the -1 entries of the
    RESHAPE shapes and SLICE sizes that use it (converters emit e.g. RESHAPE to [-1, 12])."""
    for t in pending.values():
        if t.dtype.kind != "shape" and -1 in t.shape:
            if -1 in t.shape[1:]:
                raise TosaError(source, f"tensor {t.name} has shape {t.shape}: only a dynamic "
                                        "batch (leading) dimension can be fixed")
            t.shape[0] = batch
    resolved: dict[str, list[int]] = {}
    for op, ins, outs, _ in raw_ops:
        for i, name in enumerate(ins):
            shape_t = pending[name]
            if shape_t.dtype.kind != "shape" or shape_t.data is None or -1 not in shape_t.data:
                continue
            if (op, i) not in (("RESHAPE", 1), ("SLICE", 2)):
                raise TosaError(source, f"shape {name} = {list(shape_t.data)} has a -1 that "
                                        f"{op} input {i} cannot take")
            want = [int(v) if v != -1 else d
                    for v, d in zip(shape_t.data, pending[outs[0]].shape)]
            if resolved.setdefault(name, want) != want:
                raise TosaError(source, f"shape {name} resolves to both {resolved[name]} and "
                                        f"{want}")
    for name, values in resolved.items():
        pending[name].data = np.array(values, np.int64)


def build_graph(pending, raw_ops, inputs, outputs, name, source, version="") -> Graph:
    """The validated graph of pending tensors and ``(op, inputs, outputs, attrs)`` rows."""
    for op, _, outs, _ in raw_ops:
        if op in CONST_OPS and (len(outs) != 1 or pending[outs[0]].data is None):
            raise TosaError(source, f"{op} {outs} has no embedded data")
    try:
        tensors = {n: Tensor(p.name, p.shape, p.dtype, p.data) for n, p in pending.items()}
        ops = [Operator(op, [tensors[n] for n in ins], [tensors[n] for n in outs], attrs)
               for op, ins, outs, attrs in raw_ops if op not in CONST_OPS]
        return Graph(ops, [tensors[n] for n in inputs], [tensors[n] for n in outputs], name,
                     version)
    except TosaError as exc:
        raise TosaError(f"{source}: {exc.operator}", exc.condition) from None
