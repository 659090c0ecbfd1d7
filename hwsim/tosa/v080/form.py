"""A TOSA 0.80 graph as its files hold it, before the upgrade to hwsim's (1.0) graph IR.

Both 0.80 readers (flatbuffer, MLIR text) produce this form and both 0.80 writers take it, so
the version conversion exists once (``upgrade``, ``downgrade``). Operators carry their 0.80
flatbuffer attribute table as a dict (field names and values as ``hwsim.tosa.fbtable`` reads
them: ints, bools, int lists, ``bytes`` for ``[ubyte]``, enum member names); element types are
0.80 ``DType`` names (``INT8``, ``UINT8``, ``FP32``, ...); constants hold numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

VERSION = (0, 80, 0)


@dataclass
class Tensor080:
    name: str
    shape: list[int]
    dtype: str                       # 0.80 DType name
    data: np.ndarray | None = None   # constants: the values


@dataclass
class Op080:
    op: str                          # 0.80 Op name
    inputs: list[str]
    outputs: list[str]
    attrs: dict = field(default_factory=dict)    # the 0.80 attribute table's fields

    @property
    def label(self) -> str:
        """How errors name the operator: ``CONV2D[its output]``, as the graph IR does."""
        return f"{self.op}[{self.outputs[0] if self.outputs else self.op.lower()}]"


@dataclass
class Graph080:
    tensors: dict[str, Tensor080]
    ops: list[Op080]
    inputs: list[str]
    outputs: list[str]
    name: str = "main"
    version: tuple = VERSION          # (0, 80) when the source says no patch level (MLIR)
