"""int8 graphs rewritten as FP32 graphs in LSB units, and run on HMX."""

import numpy as np
import pytest

import hwsim
from hwsim.errors import ScheduleError
from hwsim.schedule.hmx.dequantise import dequantise, lsb_inputs
from hwsim.tosa import models
from hwsim.tosa.reference import run_graph


def autoencoder():
    graph = models.model("autoencoder", dtype="int8", width=0.25, resolution=64)
    x = models.sample_input(graph)
    return graph, x, run_graph(graph, [x])[graph.outputs[0].name].astype(np.float64)


def test_dequantised_graph_tracks_the_int8_graph():
    graph, x, want = autoencoder()
    float_graph = dequantise(graph)
    assert all(t.dtype.name == "fp32" for op in float_graph for t in op.outputs)
    assert float_graph.macs == graph.macs
    feeds = lsb_inputs(graph, {graph.inputs[0].name: x})
    got = run_graph(float_graph, [feeds[graph.inputs[0].name].astype(np.float32)])
    got = next(iter(got.values())).astype(np.float64)
    # outputs are q - zp; the zero point of the output here is 0 (no ReLU at the end)
    diff = np.abs(np.floor(got + 0.5) - want)
    assert diff.max() <= 3 and diff.mean() < 0.7  # RESCALE's roundings are not reproduced


def test_dequantised_graph_on_hmx():
    graph, x, want = autoencoder()
    feeds = lsb_inputs(graph, {graph.inputs[0].name: x})
    report = hwsim.estimate(graph, "hmx", mode="dequantise", check=True,
                            inputs=[feeds[graph.inputs[0].name]])
    assert any(row.kind.startswith("CONV2D+MUL+CLAMP") for row in report.layers)
    for row in report.layers:  # within the FP32 bound, or the FP16 one
        v = row.verdict
        assert v.status != "deviates" or v.narrow.status != "deviates", str(v)
    got = next(iter(report.outputs.values())).astype(np.float64)
    diff = np.abs(np.floor(got + 0.5) - want)
    assert diff.max() <= 4 and diff.mean() < 0.8


def test_integer_graphs_need_the_mode_and_no_integer_softmax():
    graph = models.model("resnet8", dtype="int8", width=0.25, resolution=8)
    with pytest.raises(ScheduleError, match="is int8; HMX runs float graphs.*--mode dequantise"):
        hwsim.estimate(graph, "hmx")
    with pytest.raises(ScheduleError, match="TABLE.*integer-only arithmetic"):
        hwsim.estimate(graph, "hmx", mode="dequantise")
