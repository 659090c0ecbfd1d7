"""Getting graphs in and out: .tosa flatbuffers, TOSA MLIR, .tflite, and the CLI commands."""

import json
import subprocess

import numpy as np
import pytest

from hwsim.cli import main
from hwsim.errors import TosaError
from hwsim.tosa import load_graph, save_graph
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.flatbuf import read_tosa, write_tosa
from hwsim.tosa.loaders import fold_constant_layout, model_format
from hwsim.tosa.models import model, sample_input
from hwsim.tosa.reference import run_graph
from hwsim.tosa.schema import tool

from tests.models import MODELS, WHERE
needs_models = pytest.mark.skipif(not (MODELS / "kws_ref_model.tflite").exists(),
                                  reason=WHERE)


def mixed_graph():
    """A graph touching many attribute kinds and element types."""
    b = GraphBuilder("mixed")
    x = b.input((1, 4, 4, 2), "fp32", "x")
    y = b.clamp(b.conv2d(x, b.const(np.ones((2, 1, 1, 2), np.float32), "fp32"),
                         b.const(np.array([0.5, -1], np.float32), "fp32")), -1.5, 2.25)
    y = b.cast(b.cast(y, "bf16"), "fp32")
    z = b.arithmetic_right_shift(b.input((2, 3), "int32", "s"), b.const([[1, 2, 3]], "int32"))
    return b.build(b.max_pool2d(y, (2, 2), (2, 2)), z)


def test_flatbuffer_round_trip_keeps_everything():
    g = mixed_graph()
    again = read_tosa(write_tosa(g))
    assert [op.op for op in again] == [op.op for op in g]
    for a, b in zip(g, again):
        assert a.attrs == b.attrs and [t.name for t in a.inputs] == [t.name for t in b.inputs]
        for ta, tb in zip(a.inputs + a.outputs, b.inputs + b.outputs):
            assert (ta.shape, ta.dtype) == (tb.shape, tb.dtype)
            assert (ta.data is None) == (tb.data is None)
            if ta.is_const:
                assert np.array_equal(ta.data, tb.data)
    clamp = next(op for op in again if op.op == "CLAMP")
    assert (clamp.min_val, clamp.max_val, clamp.nan_mode) == (-1.5, 2.25, "PROPAGATE")
    assert next(op for op in again if op.op == "ARITHMETIC_RIGHT_SHIFT").round is True


def test_save_and_load(tmp_path):
    g = mixed_graph()
    save_graph(g, tmp_path / "m.tosa")
    assert len(load_graph(tmp_path / "m.tosa")) == len(g)
    assert len(load_graph((tmp_path / "m.tosa").read_bytes())) == len(g)


def test_mlir_text_and_bytecode_load(tmp_path):
    """TOSA MLIR as a converter writes it (dynamic batch), in text and in bytecode."""
    text = """
func.func @main(%arg0: tensor<?x4xi32>, %arg1: tensor<?x4xi32>) -> tensor<?x2x2xi32> {
  %0 = tosa.add %arg0, %arg1 : (tensor<?x4xi32>, tensor<?x4xi32>) -> tensor<?x4xi32>
  %1 = tosa.const_shape {values = dense<[-1, 2, 2]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %2 = tosa.reshape %0, %1 : (tensor<?x4xi32>, !tosa.shape<3>) -> tensor<?x2x2xi32>
  return %2 : tensor<?x2x2xi32>
}
"""
    (tmp_path / "m.mlir").write_text(text)
    g = load_graph(tmp_path / "m.mlir")
    assert [t.shape for t in g.inputs] == [(1, 4), (1, 4)] and g.outputs[0].shape == (1, 2, 2)
    assert g.operators[1].const("shape").tolist() == [1, 2, 2]
    x = np.arange(4, dtype=np.int32).reshape(1, 4)
    assert run_graph(g, [x, x])[g.outputs[0].name].ravel().tolist() == [0, 2, 4, 6]
    assert len(load_graph(tmp_path / "m.mlir", batch=3).inputs[0].shape) == 2
    assert load_graph(tmp_path / "m.mlir", batch=3).outputs[0].shape == (3, 2, 2)
    subprocess.run([str(tool("tosa-opt")), str(tmp_path / "m.mlir"), "--emit-bytecode", "-o",
                    str(tmp_path / "m.mlirbc")], check=True)
    assert model_format((tmp_path / "m.mlirbc").read_bytes()) == "mlirbc"
    assert len(load_graph(tmp_path / "m.mlirbc")) == 2


def test_dynamic_dimension_other_than_batch_is_refused(tmp_path):
    text = """
func.func @main(%arg0: tensor<1x?xi32>) -> tensor<1x?xi32> {
  %0 = tosa.add %arg0, %arg0 : (tensor<1x?xi32>, tensor<1x?xi32>) -> tensor<1x?xi32>
  return %0 : tensor<1x?xi32>
}
"""
    (tmp_path / "d.mlir").write_text(text)
    with pytest.raises(TosaError, match=r"d.mlir: .*only a dynamic batch"):
        load_graph(tmp_path / "d.mlir")


def test_bad_inputs_give_one_line_errors(tmp_path):
    (tmp_path / "junk.bin").write_bytes(b"\x00" * 64)
    with pytest.raises(TosaError, match=r"junk.bin: not a .tosa flatbuffer"):
        load_graph(tmp_path / "junk.bin")
    good = write_tosa(mixed_graph())
    with pytest.raises(TosaError, match="corrupt flatbuffer|not a TOSA flatbuffer"):
        read_tosa(good[:100], "cut.tosa")
    (tmp_path / "bad.mlir").write_text("func.func @main() { tosa.bogus }")
    with pytest.raises(TosaError, match=r"bad.mlir: tosa-opt --tosa-serialize failed: "):
        load_graph(tmp_path / "bad.mlir")
    (tmp_path / "bad.tflite").write_bytes(b"\0\0\0\0TFL3" + b"\0" * 32)
    with pytest.raises(TosaError, match=r"bad.tflite: tosa-converter-for-tflite failed"):
        load_graph(tmp_path / "bad.tflite")


def test_constant_reshape_and_transpose_fold_into_weights():
    b = GraphBuilder()
    x = b.input((1, 3, 3, 2), "fp32")
    w = b.transpose(b.reshape(b.const(np.arange(8, dtype=np.float32), "fp32"), (2, 2, 2, 1)),
                    (3, 0, 1, 2))
    y = b.conv2d(x, w, b.const(np.zeros(1, np.float32), "fp32"))
    g = b.build(y)
    folded = fold_constant_layout(g)
    assert [op.op for op in folded] == ["CONV2D"]
    assert np.array_equal(folded.operators[0].const("weight"),
                          np.arange(8, dtype=np.float32).reshape(2, 2, 2, 1).transpose(3, 0, 1, 2))
    xin = sample_input(g)
    assert np.array_equal(run_graph(g, xin)[y.name], run_graph(folded, xin)[y.name])


def test_cli_import_and_inspect_synthetic(tmp_path, capsys):
    g = model("resnet8", width=0.5, resolution=16)
    save_graph(g, tmp_path / "r.tosa")
    assert main(["import", str(tmp_path / "r.tosa"), "-o", str(tmp_path / "r2.tosa")]) == 0
    assert main(["inspect", str(tmp_path / "r2.tosa"), "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert f"{g.macs:,} MACs" in out and "CONV2D" in out and "int8[1,16,16,3]" in out
    summary = json.loads((tmp_path / "r.json").read_text())
    assert summary["macs"] == g.macs and len(summary["layers"]) == len(g)
    assert sum(row["macs"] for row in summary["layers"]) == g.macs


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "missing.tflite")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.tflite: cannot read model" in err


@needs_models
def test_cli_import_tflite(tmp_path, capsys):
    out = tmp_path / "kws.tosa"
    assert main(["import", str(MODELS / "kws_ref_model.tflite"), "-o", str(out)]) == 0
    g = load_graph(out)
    assert g.inputs[0].shape == (1, 49, 10, 1) and g.macs == 2_656_768
    assert main(["inspect", str(out)]) == 0
    assert "DEPTHWISE_CONV2D" in capsys.readouterr().out
