"""The graph IR: tensors, operators and a graph in topological order, validated when built.

What the schedulers consume. A ``Tensor`` is a name, a shape, an element type and, for a
constant, its data (a numpy array); constants are tensors with data, so CONST and CONST_SHAPE
operators do not appear in the operator list (the writer emits them again). An ``Operator`` has
its TOSA name, input and output tensors, and attributes as plain Python values (ints, bools,
lists, enum names as strings, element types as hwsim names such as ``"int32"``). Inputs are
also reachable by their spec names (``op.weight``, ``op.input_zp``) and constant inputs as
arrays (``op.const("multiplier")``, ``op.scalar("input_zp")``). A ``Graph`` wires them up
(producer and consumers of each tensor), orders the operators topologically and validates
everything on construction: structure, shapes and types, and the ERROR_IF conditions of the
operators in ``hwsim.tosa.ops``. A failure is a one-line ``TosaError`` naming the operator and
the condition. Sources: TOSA 1.0 (docs/sources.md#documents), sections 1.8 and 2.
Not modelled: control flow (COND_IF/WHILE_LOOP sub-graphs), variables, unranked tensors.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Iterable, Iterator

import numpy as np

from hwsim.errors import TosaError
from hwsim.tosa.dtypes import DType, cast, dtype
from hwsim.tosa.ops import SPECS
from hwsim.tosa.schema import schema


class Tensor:
    """A named tensor; ``data`` is set for constants (the values, as ``dtype.np``)."""

    __slots__ = ("name", "shape", "dtype", "data")

    def __init__(self, name: str, shape: Iterable[int], dt: "str | DType", data=None):
        self.name = str(name)
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype(dt)
        if any(d < 1 for d in self.shape) and not (self.dtype.kind == "shape" and
                                                   self.shape == (0,)):   # a rank-0 shape_t
            raise TosaError(f"tensor {self.name}", f"shape {list(self.shape)} has a dimension "
                                                   "< 1 (dynamic or empty)")
        self.data = None
        if data is not None:
            array = cast(self.dtype, data)
            if self.dtype.kind == "shape":
                array = array.reshape(-1)
            if array.size != self.size:
                raise TosaError(f"tensor {self.name}", f"data has {array.size} elements, shape "
                                                       f"{list(self.shape)} needs {self.size}")
            self.data = array.reshape(self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.dtype.nbytes(self.size)

    @property
    def is_const(self) -> bool:
        return self.data is not None

    def __repr__(self) -> str:
        const = " const" if self.is_const else ""
        return f"Tensor({self.name}: {self.dtype}{list(self.shape)}{const})"

    def __reduce__(self):
        # its fields as they are, the type by name (graphs go to the reference worker pickled:
        # about half the cost of pickling the slots, and nothing is checked again)
        return _tensor, (self.name, self.shape, self.dtype.name, self.data)


def _tensor(name: str, shape: tuple, dt: str, data) -> Tensor:
    """A tensor as ``Tensor.__reduce__`` gave it."""
    t = Tensor.__new__(Tensor)
    t.name, t.shape, t.dtype, t.data = name, shape, dtype(dt), data
    return t


class Operator:
    """One TOSA operator: attributes read as fields (``op.stride``), inputs by role
    (``op.bias``)."""

    def __init__(self, op: str, inputs: Iterable[Tensor], outputs: Iterable[Tensor],
                 attrs: dict[str, Any] | None = None, name: str | None = None):
        self.op = op
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.spec = SPECS.get(op)
        self.name = name or (self.outputs[0].name if self.outputs else op.lower())
        if op not in schema().ops:
            raise self.error(f"unknown operator; the TOSA schema has no {op}")
        self.attrs = self._attributes(dict(attrs or {}))

    def _attributes(self, given: dict[str, Any]) -> dict[str, Any]:
        fields = {f.name: f for f in schema().fields(self.op)}
        unknown = sorted(set(given) - set(fields))
        if unknown:
            raise self.error(f"unknown attribute {unknown[0]}; expected one of "
                             f"{', '.join(fields) or '(none)'}")
        attrs = {}
        for name, field in fields.items():
            if name not in given:
                raise self.error(f"missing attribute {name} ({field.type})")
            attrs[name] = _attribute(self, field.name, field.type, given[name])
        return attrs

    def on(self, inputs: Iterable[Tensor], outputs: Iterable[Tensor],
           name: str | None = None) -> "Operator":
        """This operator on other tensors (``name``: default the first output's, as made):
        its attributes were checked when it was made, so the copy's are not again."""
        op = Operator.__new__(Operator)
        op.op, op.inputs, op.outputs, op.spec = self.op, list(inputs), list(outputs), self.spec
        op.name = name or (op.outputs[0].name if op.outputs else self.op.lower())
        op.attrs = dict(self.attrs)
        return op

    def __reduce__(self):
        # what makes it, not its spec (a module's table) or its cached roles: pickling a
        # graph for the reference worker costs less
        return _operator, (self.op, self.inputs, self.outputs, self.name, self.attrs)

    def __getattr__(self, name: str):
        if "spec" not in self.__dict__:     # its fields not set yet: nothing to look up
            raise AttributeError(name)
        attrs = self.__dict__.get("attrs", {})
        if name in attrs:
            return attrs[name]
        roles = self.roles()
        if name in roles:
            return roles[name]
        raise AttributeError(f"{self.op} has no attribute or input {name!r}")

    def roles(self) -> dict[str, Any]:
        """Inputs and outputs by their spec names (a list for a tensor-list input); made once
        (an operator's tensors do not change), not to be modified."""
        names = self.__dict__.get("_roles")
        if names is not None:
            return names
        names = {}
        if self.spec is not None:
            names = dict(zip(self.spec.inputs, self.inputs))
            if self.spec.inputs and self.spec.inputs[-1].endswith("*"):
                names.pop(self.spec.inputs[-1])
                names[self.spec.inputs[-1][:-1]] = self.inputs[len(self.spec.inputs) - 1:]
            names.update(zip(self.spec.outputs, self.outputs))
        self._roles = names
        return names

    @property
    def output(self) -> Tensor:
        return self.outputs[0]

    def const(self, role: str) -> np.ndarray:
        """The data of a constant input (zero points, multipliers, tables, weights, shapes)."""
        tensor = self.roles().get(role)
        if not isinstance(tensor, Tensor):
            raise self.error(f"has no input {role!r}")
        if tensor.data is None:
            raise self.error(f"input {role} ({tensor.name}) is not a constant")
        return tensor.data

    def scalar(self, role: str):
        """A one-element constant input (a zero point, MUL's shift) as a Python number."""
        data = self.const(role)
        if data.size != 1:
            raise self.error(f"input {role} has {data.size} elements, expected 1")
        return data.reshape(-1)[0].item()

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the dot products this operator computes (0 for the rest)."""
        return self.spec.macs(self) if self.spec and self.spec.macs else 0

    @property
    def param_bytes(self) -> int:
        """Bytes of this operator's constant inputs (shared ones, e.g. a zero point, count in
        each operator that reads them), shapes excluded."""
        return sum(t.nbytes for t in self.inputs if t.is_const and t.dtype.kind != "shape")

    def error(self, condition: str) -> TosaError:
        return TosaError(f"{self.op}[{self.name}]", condition)

    def __repr__(self) -> str:
        ins = ", ".join(t.name for t in self.inputs)
        outs = ", ".join(t.name for t in self.outputs)
        return f"Operator({self.op}: {ins} -> {outs})"


def _attribute(op: Operator, name: str, kind: str, value):
    """One attribute value, normalised to a plain Python value of its schema type."""
    enums = schema().enums
    if kind == "[int32]":
        return [int(v) for v in np.asarray(value).reshape(-1)]
    if kind == "bool":
        return bool(value)
    if kind == "int32":
        return int(value)
    if kind == "DType":
        return dtype(value).name
    if kind in enums:
        if value not in enums[kind] or value == "UNKNOWN":
            raise op.error(f"attribute {name} = {value!r}, expected one of "
                           f"{', '.join(v for v in enums[kind] if v and v != 'UNKNOWN')}")
        return value
    if kind == "[ubyte]" and not isinstance(value, (bytes, bytearray)):
        return value.item() if isinstance(value, np.generic) else value   # CLAMP min/max
    return value


def _operator(op: str, inputs: list, outputs: list, name: str, attrs: dict) -> Operator:
    """An operator as ``Operator.__reduce__`` gave it (checked when it was first made)."""
    made = Operator.__new__(Operator)
    made.op, made.inputs, made.outputs, made.spec = op, inputs, outputs, SPECS.get(op)
    made.name, made.attrs = name, attrs
    return made


class Graph:
    """Operators in topological order with the graph's inputs and outputs, validated; with
    ``valid_ops`` (operators known valid, e.g. copies of a validated graph's with their
    tensors renamed) only the graph's structure is."""

    def __init__(self, operators: Iterable[Operator], inputs: Iterable[Tensor],
                 outputs: Iterable[Tensor], name: str = "main", version: str = "",
                 valid_ops: bool = False):
        self.name = name
        self.version = version      # the TOSA version of the file it came from ("" if none)
        self.inputs, self.outputs = list(inputs), list(outputs)
        given = list(operators)
        self.tensors: dict[str, Tensor] = {}
        for tensor in self.inputs + [t for op in given for t in op.inputs + op.outputs] + \
                self.outputs:
            self._add_tensor(tensor)
        self._producer: dict[str, Operator] = {}
        self._consumers: dict[str, list[Operator]] = {name: [] for name in self.tensors}
        for op in given:
            for t in op.outputs:
                if t.name in self._producer or t.is_const or t in self.inputs:
                    raise op.error(f"output {t.name} is already a graph input, a constant or "
                                   "the output of another operator")
                self._producer[t.name] = op
            for t in op.inputs:
                self._consumers[t.name].append(op)
        self.operators = self._topological(given)
        self._validate(valid_ops)

    def _add_tensor(self, tensor: Tensor) -> None:
        seen = self.tensors.setdefault(tensor.name, tensor)
        if seen is not tensor:
            raise TosaError(f"graph {self.name}", f"two different tensors are named "
                                                  f"{tensor.name}: {seen!r} and {tensor!r}")

    def _topological(self, given: list[Operator]) -> list[Operator]:
        """Kahn's algorithm, keeping the given order among ready operators."""
        waiting = {id(op): sum(t.name in self._producer for t in set(op.inputs)) for op in given}
        ready = [op for op in given if waiting[id(op)] == 0]
        order: list[Operator] = []
        while ready:
            op = ready.pop(0)
            order.append(op)
            for t in op.outputs:
                for user in dict.fromkeys(self._consumers[t.name]):
                    waiting[id(user)] -= 1
                    if waiting[id(user)] == 0:
                        ready.append(user)
        if len(order) != len(given):
            stuck = next(op for op in given if op not in order)
            raise stuck.error("is part of a cycle: the graph has no topological order")
        return order

    def _validate(self, valid_ops: bool) -> None:
        where = f"graph {self.name}"
        for t in self.inputs:
            if t.is_const:
                raise TosaError(where, f"graph input {t.name} is a constant")
            if t.dtype.kind == "shape":
                raise TosaError(where, f"graph input {t.name} is a shape_t (spec 1.8.2)")
        for t in self.outputs:
            if not (t.is_const or t.name in self._producer or t in self.inputs):
                raise TosaError(where, f"graph output {t.name} is never produced")
        for op in self.operators:
            for t in op.inputs:
                if not (t.is_const or t.name in self._producer or t in self.inputs):
                    raise op.error(f"input {t.name} is neither a graph input, a constant nor "
                                   "the output of an operator")
            if op.spec is not None and not valid_ops:
                op.spec.validate(op)

    # -- navigation ---------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Operator]:
        return iter(self.operators)

    def __len__(self) -> int:
        return len(self.operators)

    def tensor(self, name: str) -> Tensor:
        try:
            return self.tensors[name]
        except KeyError:
            raise TosaError(f"graph {self.name}", f"no tensor named {name!r}") from None

    def _name(self, tensor: "Tensor | str") -> str:
        return self.tensor(tensor if isinstance(tensor, str) else tensor.name).name

    def producer(self, tensor: "Tensor | str") -> Operator | None:
        """The operator that writes ``tensor`` (None for inputs and constants)."""
        return self._producer.get(self._name(tensor))

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_position", None)     # keyed by object ids: not valid in another process
        return state

    def consumers(self, tensor: "Tensor | str") -> list[Operator]:
        """The operators that read ``tensor``, in topological order."""
        users = {id(op): op for op in self._consumers[self._name(tensor)]}
        if len(users) < 2:
            return list(users.values())
        position = self.__dict__.get("_position")
        if position is None:       # made when first wanted: a scan per call made rewrites O(n^2)
            position = self._position = {id(op): i for i, op in enumerate(self.operators)}
        return sorted(users.values(), key=lambda op: position[id(op)])

    @property
    def constants(self) -> list[Tensor]:
        return [t for t in self.tensors.values() if t.is_const]

    @property
    def macs(self) -> int:
        return sum(op.macs for op in self.operators)

    @property
    def param_bytes(self) -> int:
        """Bytes of constant data (weights, biases, scales, tables, zero points), not shapes."""
        return sum(t.nbytes for t in self.constants if t.dtype.kind != "shape")

    # -- derived graphs -----------------------------------------------------------------------
    def with_outputs(self, outputs: Iterable["Tensor | str"]) -> "Graph":
        """The same operators with other graph outputs (e.g. every tensor, for goldens). Any
        tensor of a valid graph is a valid output, so nothing is validated again."""
        graph = copy.copy(self)
        graph.outputs = [self.tensor(self._name(t)) for t in outputs]
        return graph

    def operator_graph(self, op: Operator) -> "Graph":
        """A one-operator graph: ``op`` with its non-constant inputs as the graph inputs."""
        inputs = list(dict.fromkeys(t for t in op.inputs if not t.is_const))
        return Graph([op], inputs, op.outputs, f"{self.name}:{op.name}", self.version)

    def __repr__(self) -> str:
        return (f"Graph({self.name}: {len(self.operators)} operators, "
                f"{len(self.inputs)} inputs, {len(self.outputs)} outputs)")
