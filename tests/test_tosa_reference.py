"""The reference model wrapper: whole graphs, single operators, statuses, types and noise."""

import os

import ml_dtypes
import numpy as np
import pytest

from hwsim.errors import TosaError
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.ir import Graph, Operator, Tensor
from hwsim.tosa.models import model, sample_input
from hwsim.tosa.reference import (ReferenceError, goldens, key_message, reference_fp64,
                                  run_graph, run_operator)


def test_goldens_equal_single_operator_runs():
    """Every layer's one-operator golden, fed with the whole run's tensors, is the same."""
    g = model("ds_cnn", width=0.25)
    values = goldens(g, sample_input(g))
    assert set(values) >= {t.name for op in g for t in op.outputs}
    for op in g:
        for name, array in run_operator(g, op, values).items():
            assert np.array_equal(array, values[name]), op


def test_goldens_of_named_tensors_are_those_of_the_whole_run():
    """``tensors`` narrows a run to the operator outputs named and the graph's outputs (with
    the inputs and constants, as always); their values are the every-tensor run's."""
    g = model("ds_cnn", width=0.25)
    x = sample_input(g)
    every = goldens(g, x)
    named = g.operators[2].output.name
    some = goldens(g, x, [named])
    produced = {t.name for op in g for t in op.outputs}
    kept = {named} | {t.name for t in g.outputs}
    assert set(some) & produced == kept
    assert set(some) - produced == set(every) - produced         # inputs and constants
    assert all(np.array_equal(some[name], every[name]) for name in some)


def test_run_graph_accepts_lists_dicts_and_arrays():
    b = GraphBuilder()
    x, y = b.input((2, 2), "int32", "x"), b.input((2, 2), "int32", "y")
    g = b.build(b.sub(x, y))
    a, c = np.ones((2, 2), np.int32), np.full((2, 2), 3, np.int32)
    out = g.outputs[0].name
    assert run_graph(g, [a, c])[out].tolist() == [[-2, -2]] * 2
    assert run_graph(g, {"y": a, "x": c})[out].tolist() == [[2, 2]] * 2
    with pytest.raises(TosaError, match="no value for input y"):
        run_graph(g, {"x": a})
    with pytest.raises(TosaError, match=r"input x has shape \[3\], expected \[2, 2\]"):
        run_graph(g, [np.ones(3), a])
    with pytest.raises(TosaError, match="1 inputs given, the graph has 2"):
        run_graph(g, a)
    with pytest.raises(TosaError, match=r"input x: values 0.0..3000000000.0 do not fit int32"):
        run_graph(g, [np.array([[0, 3e9]] * 2), a])


def test_bf16_and_fp8_cross_as_bit_views():
    for dt, np_type in (("bf16", ml_dtypes.bfloat16), ("fp8e4m3", ml_dtypes.float8_e4m3fn),
                        ("fp8e5m2", ml_dtypes.float8_e5m2)):
        b = GraphBuilder()
        x = b.input((4,), dt)
        g = b.build(b.cast(b.cast(x, "fp32"), dt))
        values = np.array([1.5, -2.0, 0.25, 3.0]).astype(np_type)
        out = run_graph(g, values)[g.outputs[0].name]
        assert out.dtype == np_type and np.array_equal(out, values)


def test_int48_and_int4_run_through_the_binary():
    b = GraphBuilder()
    x = b.input((3,), "int48")
    g = b.build(b.rescale(x, 1.0, "int32", scale32=False))
    data = np.array([5, -7, 1 << 20])
    assert run_graph(g, data)[g.outputs[0].name].tolist() == data.tolist()
    b = GraphBuilder()
    x = b.input((4,), "int4")
    g = b.build(b.unary("IDENTITY", x))
    assert run_graph(g, np.array([1, -8, 7, 0]))[g.outputs[0].name].tolist() == [1, -8, 7, 0]


def argmax_with_bad_output():
    """ARGMAX has no check in hwsim's table, so only the reference model can reject this."""
    x, y = Tensor("x", (2, 3), "int8"), Tensor("y", (5,), "int32")
    return Graph([Operator("ARGMAX", [x], [y], dict(axis=1, nan_mode="PROPAGATE"))], [x], [y])


def rescale_with_shift(shift):
    b = GraphBuilder()
    x = b.input((1, 4), "int32")
    y = b.rescale(x, 1.0, "int8", double_round=False)
    b.operators[-1].inputs[2].data[...] = shift           # the spec REQUIREs 2 <= shift <= 62
    return b.build(y)


def test_error_and_unpredictable_become_one_line_errors_without_noise(capfd):
    with pytest.raises(ReferenceError) as info:
        run_graph(argmax_with_bad_output(), np.zeros((2, 3), np.int8))
    assert info.value.status == "ERROR" and "\n" not in str(info.value)
    assert "reference model: graph is ERROR" in str(info.value)
    with pytest.raises(ReferenceError, match=r"UNPREDICTABLE: .*shift value should stay within"):
        run_graph(rescale_with_shift(1), np.ones((1, 4), np.int32))
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""      # nothing leaked, no gdb attached
    assert os.environ["TOSA_MODEL_NO_BACKTRACE"] == "1"
    ok = run_graph(rescale_with_shift(30), np.array([[1, 2, 3, 1000]], np.int32))
    assert list(ok.values())[0].tolist() == [[1, 2, 3, 127]]


def test_key_message_picks_the_informative_line():
    text = ("WARNING AT x.cpp:1 f():\nAn error occurred\nREQUIRE() fails AT a.cpp:3\n"
            "OpRescale failure: shift too big\nGraph result: UNPREDICTABLE.")
    assert key_message(text) == "OpRescale failure: shift too big"
    assert key_message("") == "(no message)"


def test_reference_fp64_gives_reference_and_bound():
    g = model("resnet8", dtype="fp32", width=0.25, resolution=8)
    values = goldens(g, sample_input(g))
    conv = g.operators[0]
    ref, bnd = reference_fp64(g, conv, values)
    assert ref.dtype == np.float64 and ref.shape == conv.output.shape
    golden = values[conv.output.name].astype(np.float64)
    assert np.all(np.abs(ref - golden) <= 1e-6 * np.maximum(bnd, 1))
    assert np.all(bnd >= np.abs(ref))                      # the bound adds magnitudes
    with pytest.raises(ReferenceError, match="ERROR"):
        reference_fp64(argmax_with_bad_output(), argmax_with_bad_output().operators[0],
                       {"x": np.zeros((2, 3), np.int8)})


def test_builder_fully_connected_is_a_dense_layer():
    rng = np.random.default_rng(0)
    w, bias = rng.normal(size=(5, 7)).astype(np.float32), rng.normal(size=5).astype(np.float32)
    x = rng.normal(size=(3, 7)).astype(np.float32)
    b = GraphBuilder()
    y = b.fully_connected(b.input((3, 7), "fp32"), b.const(w, "fp32"), b.const(bias, "fp32"))
    g = b.build(y)
    assert [op.op for op in g] == ["RESHAPE", "CONV2D", "RESHAPE"] and g.macs == 3 * 5 * 7
    np.testing.assert_allclose(run_graph(g, x)[y.name], x @ w.T + bias, rtol=1e-5, atol=1e-5)
