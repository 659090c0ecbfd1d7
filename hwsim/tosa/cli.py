"""``hwsim import`` and ``hwsim inspect``: the model commands, registered by ``hwsim.cli``.

``import`` turns a ``.tflite`` model (or TOSA MLIR, or a ``.tosa`` file) into a ``.tosa`` file
with a fixed batch, of TOSA 1.0 or 0.80 (``--tosa-version``), or into TOSA 0.80 MLIR text when
the output ends in ``.mlir``; ``inspect`` prints a model's format and TOSA version, then its
operators in topological order with shapes, element types, MACs and parameter bytes per layer,
and the totals. Both accept any format ``load_graph`` reads.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from hwsim.tosa.loaders import TOSA_VERSIONS
from hwsim.traces.files import STANDARD_OUTPUT, atomic_write_bytes, atomic_write_text, check_output


def register(sub: argparse._SubParsersAction) -> None:
    """Add the model commands to the ``hwsim`` command's sub-parsers."""
    imp = sub.add_parser("import", help="convert a .tflite / TOSA MLIR model to a .tosa file",
                         description="Convert a model to a validated .tosa flatbuffer "
                                     "(dynamic batch fixed to --batch), or to TOSA 0.80 MLIR "
                                     "text for an output ending in .mlir.")
    imp.add_argument("model", metavar="MODEL", help=".tflite, .mlir, .mlirbc or .tosa")
    imp.add_argument("-o", "--output", metavar="OUT.tosa", required=True,
                     help="OUT.tosa (flatbuffer) or OUT.mlir (TOSA 0.80 MLIR text)")
    imp.add_argument("--batch", type=int, default=1, help="dynamic batch size (default 1)")
    imp.add_argument("--tosa-version", choices=TOSA_VERSIONS, default=None,
                     help="TOSA version to write (default 1.0; 0.80 for .mlir)")
    imp.add_argument("--mlir-dialect", choices=("llvm18", "llvm17"), default="llvm18",
                     help="for .mlir output: the LLVM release whose tosa dialect spelling "
                          "to write (default llvm18)")
    imp.set_defaults(func=cmd_import)

    ins = sub.add_parser("inspect", help="list a model's layers, shapes, MACs and parameters",
                         description="Print each operator in topological order with its "
                                     "output, shapes, element types, MACs and parameter bytes.")
    ins.add_argument("model", metavar="MODEL", help=".tosa, .tflite, .mlir or .mlirbc")
    ins.add_argument("--batch", type=int, default=1, help="dynamic batch size (default 1)")
    ins.add_argument("--json", metavar="OUT.json", help="also write the table as JSON")
    ins.set_defaults(func=cmd_inspect)


def cmd_import(args) -> int:
    from hwsim.tosa.loaders import graph_bytes, load_graph
    check_output(args.output, "-o")
    out = Path(args.output)
    mlir = out.suffix == ".mlir"
    version = args.tosa_version or ("0.80" if mlir else "1.0")
    graph = load_graph(args.model, batch=args.batch)
    data = graph_bytes(graph, version, mlir, args.mlir_dialect)   # before writing anything
    atomic_write_bytes(args.output, data, "-o")
    # the model may be going to standard output: the summary goes to stderr then
    print(f"{args.output}: TOSA {version}{' MLIR text' if mlir else ''}, {_headline(graph)}",
          file=sys.stderr if args.output in STANDARD_OUTPUT else sys.stdout)
    return 0


def _headline(graph) -> str:
    return (f"{len(graph)} operators, {graph.macs:,} MACs, {graph.param_bytes:,} parameter "
            f"bytes")


def _shape(tensor) -> str:
    return f"{tensor.dtype}[{','.join(map(str, tensor.shape))}]"


def layer_rows(graph) -> list[dict]:
    """One row per operator: what ``inspect`` prints and writes as JSON."""
    rows = []
    for index, op in enumerate(graph):
        data = [t for t in op.inputs if not t.is_const]
        rows.append({"index": index, "op": op.op, "name": op.name,
                     "inputs": [_shape(t) for t in data],
                     "outputs": [_shape(t) for t in op.outputs],
                     "macs": op.macs, "param_bytes": op.param_bytes})
    return rows


def source(model, graph) -> dict:
    """The model's file format and the TOSA version it was written in."""
    from hwsim.tosa.loaders import model_format
    with open(model, "rb") as fh:
        kind = model_format(fh.read(4096), str(model))
    names = {"tosa": ".tosa flatbuffer", "tflite": ".tflite", "mlir": "TOSA MLIR text",
             "mlirbc": "TOSA MLIR bytecode"}
    version = graph.version or "-"
    text = names[kind] + (f", TOSA {version}" if graph.version else "")
    if graph.version.startswith("0."):
        text += " (upgraded to 1.0 on reading)"
    return {"format": kind, "tosa_version": version, "text": text}


def cmd_inspect(args) -> int:
    from hwsim.tosa.loaders import load_graph
    if args.json:
        check_output(args.json, "--json")
    graph = load_graph(args.model, batch=args.batch)
    rows = layer_rows(graph)
    origin = source(args.model, graph)
    print(f"{args.model}: {_headline(graph)}")
    print(f"source:  {origin['text']}")
    print("inputs:  " + ", ".join(f"{t.name} {_shape(t)}" for t in graph.inputs))
    print("outputs: " + ", ".join(f"{t.name} {_shape(t)}" for t in graph.outputs))
    print(f"{'#':>4}  {'operator':<22} {'output':<16} {'input -> output':<44} "
          f"{'MACs':>11} {'params':>9}")
    for row in rows:
        flow = f"{' '.join(row['inputs']) or '-'} -> {' '.join(row['outputs'])}"
        print(f"{row['index']:>4}  {row['op']:<22} {row['name'][:16]:<16} {flow:<44} "
              f"{row['macs']:>11,} {row['param_bytes']:>9,}")
    counts = Counter(op.op for op in graph)
    print("operators: " + ", ".join(f"{name} {n}" for name, n in counts.most_common()))
    if args.json:
        summary = {"model": str(args.model), "format": origin["format"],
                   "tosa_version": origin["tosa_version"], "operators": len(graph),
                   "macs": graph.macs,
                   "param_bytes": graph.param_bytes, "layers": rows}
        atomic_write_text(args.json, json.dumps(summary, indent=1) + "\n", "--json")
    return 0
