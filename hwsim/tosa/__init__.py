"""What a model means: the TOSA graph IR, loaders, the reference model and numerics judging."""

from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.loaders import load_graph, save_graph

__all__ = ["Graph", "Operator", "Tensor", "load_graph", "save_graph"]
