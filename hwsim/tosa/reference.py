"""The official TOSA reference model as the judge: whole graphs, single operators, fp64 bounds.

``run_graph`` runs a graph on the reference model (tosa-tools' ``tosa_reference_model`` Python
binding, in-process: about 10-50 ms for the MLPerf Tiny models); ``goldens`` returns every tensor
of one run; ``run_operator`` runs one operator of a graph as a one-operator graph on given inputs
(the golden for a simulated layer, so errors do not accumulate across layers);
``reference_fp64`` returns the fp64 reference and the dot-product bound of an operator (the
binary's ``--precise_mode``; the binding's precise mode cannot return its outputs).

What the reference model needs is handled here: bf16/fp8 tensors cross as integer views (and
as ``<V2``/``<V1`` ``.npy`` files for the binary); int4/int48 graph inputs and outputs, which
the binding rejects, and ``isolated=True`` runs (thread-safe) go through the binary in a
subprocess; its prints on bad graphs are captured at the file-descriptor level and reduced to
one line; it is told not to attach gdb (``TOSA_MODEL_NO_BACKTRACE``, read by its fatal-error
handler); and its ERROR / UNPREDICTABLE statuses become a ``ReferenceError`` (a ``TosaError``)
with that line.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np

from hwsim.errors import TosaError
from hwsim.tosa.dtypes import DType, cast, from_bits, to_bits
from hwsim.tosa.flatbuf import write_tosa
from hwsim.tosa.ir import Graph, Operator
from hwsim.tosa.schema import tool

# The reference model's fatal-error handler attaches gdb to the process unless this is set.
os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")

# element types the Python binding rejects as graph inputs/outputs: these run on the binary
BINARY_ONLY = ("int4", "int48")
Inputs = Sequence[np.ndarray] | Mapping[str, np.ndarray] | np.ndarray


class ReferenceError(TosaError):
    """The reference model found the graph in ERROR or UNPREDICTABLE state."""

    def __init__(self, where: str, status: str, message: str):
        self.status = status
        super().__init__(where, f"reference model: graph is {status}: {message}")


# file descriptors are process-wide: one capture at a time, or threads restore each other's
_CAPTURE = threading.Lock()
# the C library's stdio, loaded once: each load makes a reference cycle of ctypes types
_LIBC = ctypes.CDLL(None)


@contextlib.contextmanager
def captured_output() -> Iterator[list[str]]:
    """Send file descriptors 1 and 2 to a temporary file; yields a list that gets the text.
    Output of other threads during the capture is captured too (use ``isolated`` runs in
    threaded callers)."""
    sys.stdout.flush()
    sys.stderr.flush()
    box: list[str] = []
    with _CAPTURE, tempfile.TemporaryFile() as sink:
        saved = os.dup(1), os.dup(2)
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield box
        finally:
            _LIBC.fflush(None)      # the library's buffered C stdio
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            sink.seek(0)
            box.append(sink.read().decode(errors="replace"))


def key_message(text: str) -> str:
    """The line that says what went wrong, out of the reference model's output."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("WARNING AT", "An error occurred",
                                                              "Graph result", "Failed to"))]
    for marker in ("validation error", "failure:", "fails AT", "ERROR", "rror"):
        for line in useful:
            if marker in line:
                return line
    return useful[0] if useful else "(no message)"


def graph_inputs(graph: Graph, inputs) -> list[np.ndarray]:
    """Inputs in graph order, as values of each input's element type (shapes checked)."""
    if isinstance(inputs, np.ndarray) or np.isscalar(inputs):
        inputs = [inputs]
    if isinstance(inputs, Mapping):
        missing = [t.name for t in graph.inputs if t.name not in inputs]
        if missing:
            raise TosaError(f"graph {graph.name}", f"no value for input {missing[0]}")
        inputs = [inputs[t.name] for t in graph.inputs]
    if len(inputs) != len(graph.inputs):
        raise TosaError(f"graph {graph.name}", f"{len(inputs)} inputs given, the graph has "
                                               f"{len(graph.inputs)}")
    arrays = []
    for t, value in zip(graph.inputs, inputs):
        array = np.asarray(value)
        if array.shape != t.shape:
            raise TosaError(f"graph {graph.name}", f"input {t.name} has shape "
                                                   f"{list(array.shape)}, expected {list(t.shape)}")
        try:
            arrays.append(cast(t.dtype, array) if t.dtype.is_int else array.astype(t.dtype.np))
        except TosaError as exc:
            raise TosaError(f"graph {graph.name}", f"input {t.name}: {exc.condition}") from None
    return arrays


_METER: contextvars.ContextVar[list | None] = contextvars.ContextVar("reference_meter",
                                                                     default=None)


@contextlib.contextmanager
def metered() -> Iterator[list[float]]:
    """Yields a list whose one item sums the seconds spent in ``run_graph`` within the block
    (how much of a check is the reference model's own time)."""
    box = [0.0]
    token = _METER.set(box)
    try:
        yield box
    finally:
        _METER.reset(token)


@contextlib.contextmanager
def timed() -> Iterator[None]:
    """Adds the block's seconds to the ``metered`` box, if one is open."""
    box, start = _METER.get(), time.perf_counter()
    try:
        yield
    finally:
        if box is not None:
            box[0] += time.perf_counter() - start


def run_graph(graph: Graph, inputs: Inputs, isolated: bool = False) -> dict[str, np.ndarray]:
    """Run ``graph`` on the reference model; the outputs by name, as each tensor's values.
    ``isolated`` runs the reference model binary in a subprocess (thread-safe, slower)."""
    with timed():
        arrays = bits(graph, graph_inputs(graph, inputs))
        if isolated or binary_only(graph):
            return dict(zip((t.name for t in graph.outputs), _run_binary(graph, arrays)[0]))
        return results(graph, run_flatbuffer(write_tosa(graph), arrays))


def bits(graph: Graph, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The inputs as ``graph_inputs`` gives them, as the reference model takes them: their
    bits."""
    return [to_bits(t.dtype, a) for t, a in zip(graph.inputs, arrays)]


def binary_only(graph: Graph) -> bool:
    """A graph input or output is of a type only the reference model binary takes."""
    return any(t.dtype.name in BINARY_ONLY for t in graph.inputs + graph.outputs)


def run_flatbuffer(flatbuffer: bytes, arrays: list[np.ndarray]) -> tuple[list | None, str, str]:
    """One run of the Python binding: (raw outputs or None, the graph's status, what the
    reference model printed): all of it plain data, for a run in another process too."""
    import tosa_reference_model as rm
    with captured_output() as text:
        try:
            raw, status = rm.run(flatbuffer, arrays)
            failed = None
        except ValueError as exc:
            failed = str(exc)
    if failed is not None:
        return None, "ERROR", text[0] + "\n" + failed
    if status == rm.GraphStatus.TOSA_VALID:
        return raw, "VALID", text[0]
    return None, "UNPREDICTABLE" if status == rm.GraphStatus.TOSA_UNPREDICTABLE else "ERROR", \
        text[0]


def results(graph: Graph, ran: tuple[list | None, str, str]) -> dict[str, np.ndarray]:
    """``run_flatbuffer``'s result as the graph's outputs by name, or its ReferenceError."""
    raw, status, text = ran
    if raw is None:
        raise ReferenceError(f"graph {graph.name}", status, key_message(text))
    return {t.name: from_bits(t.dtype, a).reshape(t.shape) for t, a in zip(graph.outputs, raw)}


def goldens(graph: Graph, inputs: Inputs, tensors=None) -> dict[str, np.ndarray]:
    """The tensors of one reference run: graph inputs, constants and the operator outputs named
    in ``tensors`` (default: all of them) or among the graph's outputs."""
    whole, values = goldens_graph(graph, inputs, tensors)
    values.update(run_graph(whole, values_for(graph, values)))
    return values


def goldens_graph(graph: Graph, inputs: Inputs, tensors=None) \
        -> tuple[Graph, dict[str, np.ndarray]]:
    """``graph`` with the operator outputs ``goldens`` gives (``tensors``: names, default every
    one) as its outputs, and the values of its inputs and constants: what ``goldens`` runs, and
    what it adds to that run's outputs."""
    wanted = None if tensors is None else set(tensors) | {t.name for t in graph.outputs}
    produced = [t for op in graph for t in op.outputs if wanted is None or t.name in wanted]
    values = dict(zip((t.name for t in graph.inputs), graph_inputs(graph, inputs)))
    values.update({t.name: t.data for t in graph.constants})
    return graph.with_outputs(produced), values


def values_for(graph: Graph, values: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    return [values[t.name] for t in graph.inputs]


def run_operator(graph: Graph, op: Operator, values: Mapping[str, np.ndarray]) \
        -> dict[str, np.ndarray]:
    """The reference outputs of one operator of ``graph`` on the given input tensors (by name,
    e.g. the simulator's own inputs to that layer); constants come from the graph."""
    single = graph.operator_graph(op)
    return run_graph(single, values_for(single, values))


def reference_fp64(graph: Graph, op: Operator, values: Mapping[str, np.ndarray]) \
        -> tuple[np.ndarray, np.ndarray]:
    """fp64 reference output and dot-product bound (spec 1.8.2 ``output_ref``/``output_bnd``)
    of one floating-point operator, from the reference model binary in precise mode."""
    single = graph.operator_graph(op)
    return precise(single, values)[op.output.name]


def precise(graph: Graph, values: Mapping[str, np.ndarray]) -> dict:
    """Output name -> (fp64 reference, bound) of every output of a floating-point graph: one
    run of the reference model binary in precise mode."""
    arrays = [to_bits(t.dtype, a) for t, a in zip(graph.inputs, values_for(graph, values))]
    outputs, bounds = _run_binary(graph, arrays, precise=True)
    return {t.name: (o, b) for t, o, b in zip(graph.outputs, outputs, bounds)}


def _run_binary(graph: Graph, arrays: list[np.ndarray], precise: bool = False) \
        -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Run the reference model binary on a test description in a temporary folder: for
    precise mode (fp64 results and bounds) and the types the Python binding rejects."""
    names = [t.name for t in graph.outputs]
    with tempfile.TemporaryDirectory(prefix="hwsim-ref-") as tmp:
        folder = Path(tmp)
        (folder / "graph.tosa").write_bytes(write_tosa(graph))
        ifm = [f"in{i}.npy" for i in range(len(arrays))]
        for t, name, array in zip(graph.inputs, ifm, arrays):
            save_npy(folder / name, t.dtype, from_bits(t.dtype, array))
        desc = {"tosa_file": "graph.tosa", "ifm_name": [t.name for t in graph.inputs],
                "ifm_file": ifm, "ofm_name": names,
                "ofm_file": [f"out{i}.npy" for i in range(len(names))], "expected_failure": False,
                "test_requirements": {"bounds_file_required": precise}}
        (folder / "desc.json").write_text(json.dumps(desc))
        done = subprocess.run([str(tool("tosa_reference_model")), "--test_desc",
                               str(folder / "desc.json"), "--precise_mode", str(int(precise))],
                              capture_output=True, text=True,
                              env={**os.environ, "TOSA_MODEL_NO_BACKTRACE": "1"})
        if done.returncode != 0:
            status = "UNPREDICTABLE" if done.returncode == 1 else "ERROR"
            raise ReferenceError(f"graph {graph.name}", status,
                                 key_message(done.stderr + "\n" + done.stdout))
        outputs = [np.load(folder / f"out{i}.npy").reshape(t.shape)
                   for i, t in enumerate(graph.outputs)]
        if not precise:
            return [from_bits(t.dtype, a) for t, a in zip(graph.outputs, outputs)], None
        return outputs, [np.load(folder / f"bounds_out{i}.npy").reshape(t.shape)
                         for i, t in enumerate(graph.outputs)]


def save_npy(path, dt: DType, values) -> None:
    """A ``.npy`` file as the reference model writes it: bf16/fp8e4m3 as little-endian void
    (``<V2``/``<V1``), which ``tosa_verify`` requires, fp8e5m2 as its bytes (uint8), other
    types as numpy saves them."""
    array = np.asarray(values, dtype=dt.np)
    if dt.view is None or dt.name == "fp8e5m2":
        np.save(path, array if dt.view is None else array.view(dt.view))
        return
    header = {"descr": f"<V{array.itemsize}", "fortran_order": False, "shape": array.shape}
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(array.tobytes())
