"""What a model means: the TOSA graph IR, loaders, the reference model and numerics judging.

Modules: ``ir`` (Tensor, Operator, Graph), ``ops`` (the operator table and ERROR_IF checks),
``dtypes``, ``schema``, ``flatbuf`` (.tosa read/write), ``fbtable`` (flatbuffer tables from a
parsed schema), ``v080`` (TOSA 0.80 files in and out), ``loaders`` (.tflite/MLIR import),
``builder`` (GraphBuilder), ``models`` (synthetic MLPerf Tiny networks), ``reference`` (the
official reference model), ``numerics`` and ``judge`` (TOSA compliance checks and verdicts),
``sut`` (the conformance runner's system under test and the target registry), ``cli``.
"""

from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.loaders import load_graph, save_graph

__all__ = ["Graph", "GraphBuilder", "Operator", "Tensor", "load_graph", "save_graph"]
