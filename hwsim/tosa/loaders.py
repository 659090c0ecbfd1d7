"""Getting a model into a ``Graph``: ``.tosa`` flatbuffers, TOSA MLIR text or bytecode, ``.tflite``.

The format is recognised by content, not by file name: a ``TOSA`` flatbuffer identifier, a
``TFL3`` TFLite identifier, the MLIR bytecode magic ``ML\\xefR``, or MLIR text. MLIR becomes a
flatbuffer through ``tosa-opt --tosa-serialize=tosa-flatbuffer-filename=OUT`` (shipped with
tosa-tools); a ``.tflite`` model becomes TOSA MLIR bytecode through tosa-converter-for-tflite
first. Converters keep the dynamic batch of the MLPerf Tiny models (``?`` in MLIR,
-1 in the flatbuffer); it is fixed to ``batch`` (default 1) when the graph is built, including
the ``-1`` entries of RESHAPE shapes and SLICE sizes that depend on it. RESHAPE/TRANSPOSE of
constants are folded into constants. Everything runs locally, without a cache or network access.
TOSA 0.80 flatbuffers and MLIR text are read by ``hwsim.tosa.v080`` and upgraded to 1.0;
``save_graph``/``graph_bytes`` write 1.0 flatbuffers, or 0.80 flatbuffers and MLIR text.

Both converters run in child processes, so that a crash on a corrupt file (the .tflite converter
segfaults on some) is a one-line error; their own messages (absl warnings, MLIR diagnostics) are
logged at debug level (``hwsim --debug``), an ``error:`` among them fails the import with its
text, and their temporary files go whatever happens.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from hwsim.errors import ConfigError, HwsimError, TosaError
from hwsim.traces.files import atomic_write_bytes
from hwsim.tosa.flatbuf import read_tosa, write_tosa
from hwsim.tosa.ir import Graph, Tensor
from hwsim.tosa.schema import tool

MLIR_BYTECODE = b"ML\xefR"
MAX_BATCH = 65536           # beyond it a model's activations fit no simulated memory
CONVERT_TIMEOUT_S = 600     # a conversion of any MLPerf Tiny model takes about a second

log = logging.getLogger(__name__)


def model_format(data: bytes, source: str = "model") -> str:
    """``"tosa"``, ``"tflite"``, ``"mlirbc"`` or ``"mlir"`` (text), from the bytes."""
    if data[4:8] == b"TOSA":
        return "tosa"
    if data[4:8] == b"TFL3":
        return "tflite"
    if data[:4] == MLIR_BYTECODE:
        return "mlirbc"
    head = data[:4096]
    if b"tosa." in head or b"func.func" in head or b"module" in head:
        return "mlir"
    raise TosaError(source, "not a .tosa flatbuffer, TOSA MLIR text/bytecode or .tflite model")


def load_graph(model: "str | Path | bytes", batch: int = 1) -> Graph:
    """A validated graph from a model file (or its bytes); a dynamic batch becomes ``batch``."""
    if not 1 <= batch <= MAX_BATCH:
        raise ConfigError(f"batch: expected 1..{MAX_BATCH:,}, found {batch}")
    data, source = _read(model)
    kind = model_format(data, source)
    if kind == "mlir" and is_080_mlir(data):
        from hwsim.tosa.v080.mlir import parse_080
        from hwsim.tosa.v080.upgrade import upgrade
        return fold_constant_layout(upgrade(parse_080(data, source), source, batch))
    if kind == "tosa":
        return fold_constant_layout(read_tosa(data, source, batch=batch))
    if kind == "tflite":
        data, kind = tflite_to_mlir(data, source), "mlirbc"
    graph = read_tosa(mlir_to_tosa(data, source), source, batch=batch)
    graph.version = "1.0"       # the dialect tosa-opt reads, not the stamp it writes
    return fold_constant_layout(graph)


# Spellings of the TOSA 0.80 MLIR dialect (LLVM 17-18) that the 1.0 dialect no longer has.
MLIR_080 = re.compile(rb"quantization_info|double_round|new_shape|tosa\.fully_connected|"
                      rb"min_int\s*=|\{value\s*=\s*dense")


def is_080_mlir(data: bytes) -> bool:
    """True for TOSA MLIR text in the 0.80 dialect (recognised by its spellings)."""
    return MLIR_080.search(data) is not None


def fold_constant_layout(graph: Graph) -> Graph:
    """RESHAPE and TRANSPOSE of constants become constants (converters emit them for weights,
    e.g. depthwise weights reshaped to [KH,KW,C,M]), so a layer's weights are its own data."""
    folded: dict[str, Tensor] = {}
    kept = []
    for op in graph:
        ins = [folded.get(t.name, t) for t in op.inputs]
        if op.op in FOLDABLE and ins[0].is_const:
            out = op.output
            folded[out.name] = Tensor(out.name, out.shape, out.dtype,
                                      FOLDABLE[op.op](op, ins[0].data).reshape(out.shape))
        else:
            kept.append(op.on(ins, op.outputs, op.name) if ins != op.inputs else op)
    if not folded:
        return graph
    outputs = [folded.get(t.name, t) for t in graph.outputs]
    return Graph(kept, graph.inputs, outputs, graph.name, graph.version)


FOLDABLE = {
    "RESHAPE": lambda op, data: data,                   # row-major order is kept
    "TRANSPOSE": lambda op, data: np.transpose(data, op.perms),
}


TOSA_VERSIONS = ("1.0", "0.80")


def save_graph(graph: Graph, path: "str | Path", version: str = "1.0") -> None:
    """Write ``graph`` atomically: a ``.tosa`` flatbuffer of TOSA ``version`` (1.0 or 0.80)
    or, for a ``.mlir`` path, TOSA 0.80 MLIR text. What 0.80 cannot express is a one-line
    ``TosaError`` naming the operator, raised before anything is written."""
    atomic_write_bytes(path, graph_bytes(graph, version, Path(path).suffix == ".mlir"))


def graph_bytes(graph: Graph, version: str = "1.0", mlir: bool = False,
                dialect: str = "llvm18") -> bytes:
    """What ``save_graph`` writes; ``dialect`` picks the LLVM release whose spelling of the
    0.80 MLIR dialect is written (``llvm18`` or ``llvm17``)."""
    if version not in TOSA_VERSIONS:
        raise ConfigError(f"TOSA version {version!r}: hwsim writes {' or '.join(TOSA_VERSIONS)}")
    if version == "1.0":
        if mlir:
            raise ConfigError("MLIR text is written for TOSA 0.80 only (--tosa-version 0.80); "
                              "1.0 graphs are written as .tosa flatbuffers")
        return write_tosa(graph)
    from hwsim.tosa.v080.downgrade import downgrade
    old = downgrade(graph)
    if mlir:
        from hwsim.tosa.v080.mlir_print import print_080
        return print_080(old, dialect).encode()
    from hwsim.tosa.v080.flatbuf import write_080
    return write_080(old)


def _read(model) -> tuple[bytes, str]:
    if isinstance(model, (bytes, bytearray)):
        return bytes(model), "<bytes>"
    path = Path(model)
    try:
        return path.read_bytes(), str(path)
    except OSError as exc:
        raise HwsimError(f"{path}: cannot read model: {exc.strerror}") from None


# The converter, run by the child process: a Python error becomes one "error:" line
_CONVERTER = """
import sys
from tosa_converter_for_tflite import TosaConverterOutputFormat, tflite_flatbuffer_to_tosa_mlir
with open(sys.argv[2], "wb") as out:
    try:
        tflite_flatbuffer_to_tosa_mlir(sys.argv[1], out, TosaConverterOutputFormat.Bytecode)
    except Exception as exc:
        sys.exit(f"error: {exc}")
"""


def tflite_to_mlir(data: bytes, source: str = "<tflite>") -> bytes:
    """TOSA MLIR bytecode for a ``.tflite`` model (tosa-converter-for-tflite, in a child)."""
    if importlib.util.find_spec("tosa_converter_for_tflite") is None:
        raise ConfigError("importing .tflite models needs tosa-converter-for-tflite "
                          "(pip install 'hwsim[tflite]')")
    with tempfile.TemporaryDirectory(prefix="hwsim-import-") as tmp:
        model, out = Path(tmp) / "model.tflite", Path(tmp) / "model.mlirbc"
        model.write_bytes(data)
        _convert([sys.executable, "-c", _CONVERTER, str(model), str(out)],
                 "tosa-converter-for-tflite", source, tmp)
        return out.read_bytes()


def mlir_to_tosa(data: bytes, source: str = "<mlir>") -> bytes:
    """A ``.tosa`` flatbuffer for TOSA MLIR text or bytecode (``tosa-opt --tosa-serialize``)."""
    with tempfile.TemporaryDirectory(prefix="hwsim-import-") as tmp:
        mlir, out = Path(tmp) / "model.mlir", Path(tmp) / "model.tosa"
        mlir.write_bytes(data)
        cmd = [str(tool("tosa-opt")), str(mlir),
               f"--tosa-serialize=tosa-flatbuffer-filename={out}", "-o", str(Path(tmp) / "out")]
        _convert(cmd, "tosa-opt --tosa-serialize", source, tmp)
        if not out.exists():
            raise TosaError(source, "tosa-opt --tosa-serialize wrote no flatbuffer")
        return out.read_bytes()


def _convert(cmd: list[str], name: str, source: str, folder: str) -> None:
    """Run a converter; its messages go to the debug log, its failure (a crash, an exit status,
    or an ``error:`` it printed and went on after) is a ``TosaError`` with the reason."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                              timeout=CONVERT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise TosaError(source, f"{name} did not finish in {CONVERT_TIMEOUT_S} s") from None
    lines = [line.replace(folder + "/", "").strip() for line in
             (done.stderr + done.stdout).splitlines() if line.strip()]
    for line in lines:
        log.debug("%s: %s", name, line)
    if done.returncode < 0:
        number = -done.returncode
        crash = signal.Signals(number).name if number in signal.valid_signals() else number
        raise TosaError(source, f"{name} crashed ({crash}); the model file is probably corrupt")
    errors = [line.split("error:", 1)[1].strip() for line in lines if "error:" in line]
    if done.returncode != 0 or errors:
        reason = errors[0] if errors else lines[0] if lines else f"exit status {done.returncode}"
        raise TosaError(source, f"{name} failed: {reason}")
