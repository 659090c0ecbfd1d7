"""The official TOSA reference model as an oracle for single operators (or short sequences).

A test describes the operator as TOSA MLIR (the form tosa-converter-for-tflite emits); the
module is serialised with ``tosa-opt --tosa-serialize`` and run by ``tosa_reference_model``.
Tests skip when the tools are missing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32}


def _tosa_opt() -> str:
    found = shutil.which("tosa-opt") or str(Path(sys.executable).with_name("tosa-opt"))
    if not Path(found).exists():
        pytest.skip("tosa-opt not installed")
    return found


def ttype(shape, dtype: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


class Graph:
    """A one-function TOSA MLIR module built line by line."""

    def __init__(self):
        self.args, self.lines, self.types, self.inputs = [], [], {}, []
        self.count = 0

    def _name(self, ty: str) -> str:
        name = f"%v{self.count}"
        self.count += 1
        self.types[name] = ty
        return name

    def input(self, array: np.ndarray, dtype: str) -> str:
        name = f"%arg{len(self.args)}"
        ty = ttype(array.shape, dtype)
        self.types[name] = ty
        self.args.append(f"{name}: {ty}")
        self.inputs.append(np.asarray(array).astype(NP[dtype]))
        return name

    def const(self, array, dtype: str) -> str:
        array = np.asarray(array)
        ty = ttype(array.shape, dtype)
        name = self._name(ty)
        self.lines.append(f'{name} = "tosa.const"() <{{values = dense<{array.tolist()}> : {ty}}}>'
                          f' : () -> {ty}')
        return name

    def shape(self, values) -> str:
        ty = f"!tosa.shape<{len(values)}>"
        name = self._name(ty)
        self.lines.append(f"{name} = tosa.const_shape {{values = dense<{list(values)}> : "
                          f"tensor<{len(values)}xindex>}} : () -> {ty}")
        return name

    def op(self, op: str, operands: list[str], out_shape, out_dtype: str, attrs: str = "") -> str:
        ty = ttype(out_shape, out_dtype)
        name = self._name(ty)
        ins = ", ".join(self.types[o] for o in operands)
        attr = f" {{{attrs}}}" if attrs else ""
        self.lines.append(f"{name} = tosa.{op} {', '.join(operands)}{attr} : ({ins}) -> {ty}")
        return name

    def run(self, result: str) -> np.ndarray:
        text = (f"func.func @main({', '.join(self.args)}) -> {self.types[result]} {{\n  "
                + "\n  ".join(self.lines) + f"\n  return {result} : {self.types[result]}\n}}\n")
        import tosa_reference_model
        with tempfile.TemporaryDirectory() as tmp:
            src, out = Path(tmp) / "g.mlir", Path(tmp) / "g.tosa"
            src.write_text(text)
            done = subprocess.run([_tosa_opt(), "--tosa-serialize",
                                   f"--tosa-flatbuffer-filename={out}", str(src)],
                                  capture_output=True, text=True)
            assert done.returncode == 0, done.stderr + text
            outputs, status = tosa_reference_model.run(out.read_bytes(), self.inputs)
        assert status == tosa_reference_model.GraphStatus.TOSA_VALID, text
        return outputs[0]
