"""int8 graphs rewritten as FP32 graphs in LSB units, run on HMX and judged as int8 models."""

import re
from pathlib import Path

import numpy as np
import pytest

import hwsim
from hwsim.errors import ScheduleError
from hwsim.schedule import requantise
from hwsim.schedule.hmx import softmax
from hwsim.schedule.hmx.dequantise import dequantise
from hwsim.tosa import models
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.reference import run_graph

from tests.models import model

INT8_MODELS = ["kws_ref_model", "vww_96_int8", "resnet8_int8", "ad01_int8"]


def autoencoder():
    graph = models.model("autoencoder", dtype="int8", width=0.25, resolution=64)
    x = models.sample_input(graph)
    return graph, x, run_graph(graph, [x])[graph.outputs[0].name]


def int8_layers(report) -> dict:
    """Layer index -> its verdict as int8 (layers whose output is an int8 tensor)."""
    return {row.index: row.verdict.requantised for row in report.layers
            if row.verdict.requantised is not None}


def test_dequantised_graph_tracks_the_int8_graph():
    graph, x, want = autoencoder()
    rewritten = dequantise(graph)
    float_graph = rewritten.graph
    assert rewritten.source is graph
    assert all(t.dtype.name == "fp32" for op in float_graph for t in op.outputs)
    assert float_graph.macs == graph.macs
    feeds = requantise.feeds(rewritten, {graph.inputs[0].name: x})
    got = run_graph(float_graph, [feeds[graph.inputs[0].name]])[graph.outputs[0].name]
    out = graph.outputs[0]
    diff = np.abs(requantise.integers(got, out, rewritten.offsets[out.name]).astype(int) - want)
    assert diff.max() <= 3 and diff.mean() < 0.7  # RESCALE's roundings are not reproduced


def test_integers_round_halves_up_and_saturate():
    t = GraphBuilder().input((5,), "int8")
    values = np.array([0.5, -0.5, 1.49, 300.0, -300.0])
    assert requantise.integers(values, t, -128).tolist() == [-127, -128, -127, 127, -128]
    assert requantise.integers(np.array([0.25, 1.0]), GraphBuilder().input((2,), "int32"), 0,
                               unit=4.0).tolist() == [1, 4]


def test_a_dequantised_model_on_hmx_is_judged_as_the_int8_model():
    graph, x, want = autoencoder()
    report = hwsim.estimate(graph, "hmx", mode="dequantise", check=True, inputs=x)
    assert any(row.kind.startswith("CONV2D+MUL+CLAMP") for row in report.layers)
    out = report.outputs[graph.outputs[0].name]
    assert out.dtype == np.int8      # the outputs as the int8 model has them
    assert np.abs(out.astype(int) - want).max() <= 4
    verdicts = int8_layers(report)
    assert len(verdicts) == len([r for r in report.layers if r.kind != "RESHAPE"]) + 1
    assert all(v.dtype == "int8" and v.unit == "LSB" and v.max_err <= 3 for v in
               verdicts.values()), [r.verdict.brief() for r in report.layers]
    first = report.layers[1].verdict.brief()
    assert first.startswith("int8 ") and "as fp16" in first
    output = report.output_verdicts[graph.outputs[0].name].requantised
    assert output.count == want.size and output.max_err <= 4


def test_residual_sums_stay_in_fp16_range_and_the_softmax_runs():
    # int32 sums at 2^19-2^20 times an int8 LSB, and an int8 softmax built from a TABLE
    graph = models.model("resnet8", dtype="int8", width=0.25, resolution=8)
    report = hwsim.estimate(graph, "hmx", mode="dequantise", check=True)
    assert all(np.isfinite(r.verdict.max_err) for r in report.layers)
    assert max(v.max_err for v in int8_layers(report).values()) <= 2
    last = report.layers[-1]
    assert re.fullmatch(r"the int8 softmax of \S+ \(24 integer operators\) as 25[56](\.\d)? "
                        r"softmax\(0\.05 x\), within 0\.5\d? LSB of the integer softmax on "
                        r"256 random rows", last.notes[0]), last.notes[0]
    assert report.output_verdicts[graph.outputs[0].name].requantised.max_err <= 1


def test_the_softmax_is_measured_from_its_table():
    graph = models.model("ds_cnn", width=0.25, resolution=12)
    (region,) = softmax.find(graph)
    assert region.exit.output is graph.outputs[0] and "TABLE" in {op.op for op in region.ops}
    fit = softmax.measure(region)
    head = region.head.input     # the logits' scale, which the synthetic table exponentiates
    assert fit.scale == pytest.approx(256, abs=0.5) and fit.fit_lsb <= 0.6
    assert (fit.low, fit.high) == (0.0, 255.0) and head.dtype.name == "int8"


def test_avg_pool_keeps_the_offset_of_its_input():
    # converters give AVG_POOL2D zero points 0 and 0 for a tensor whose zero point is -128
    b = GraphBuilder("pool")
    x = b.input((1, 4, 4, 8), "int8")
    w = b.const(np.arange(-32, 32).reshape(8, 1, 1, 8).astype(np.int8), "int8")
    y = b.clamp(b.rescale(b.conv2d(x, w, b.const(np.zeros(8, np.int32), "int32"),
                                   input_zp=3), 1 / 200, "int8", output_zp=-128), -128, 127)
    pooled = b.avg_pool2d(y, (4, 4), (4, 4))
    z = b.rescale(b.conv2d(pooled, w, b.const(np.zeros(8, np.int32), "int32"), input_zp=-128),
                  1 / 100, "int8", output_zp=5)
    graph = b.build(z)
    rewritten = dequantise(graph)
    assert rewritten.offsets[pooled.name] == -128
    report = hwsim.estimate(graph, "hmx", mode="dequantise", check=True)
    assert max(v.max_err for v in int8_layers(report).values()) <= 1


def test_the_error_without_the_mode_names_the_mode():
    graph = models.model("resnet8", dtype="int8", width=0.25, resolution=8)
    with pytest.raises(ScheduleError, match=r"^an integer graph \(input is int8\): HMX runs "
                                            r"float graphs in FP16; run it with --mode "
                                            r"dequantise"):
        hwsim.estimate(graph, "hmx")
    with pytest.raises(ScheduleError, match="--mode dequantise is for integer graphs"):
        hwsim.estimate(models.model("resnet8", dtype="fp32", width=0.25, resolution=8), "hmx",
                       mode="dequantise")
    b = GraphBuilder("lookup")          # a TABLE outside a softmax has no float counterpart
    x = b.input((1, 8), "int8")
    graph = b.build(b.table(x, np.arange(256) - 128))
    with pytest.raises(ScheduleError, match=r"TABLE\[.*integer-only arithmetic.*int8 softmax"):
        hwsim.estimate(graph, "hmx", mode="dequantise")


@pytest.mark.parametrize("name", INT8_MODELS)
def test_an_int8_mlperf_model_without_the_mode_names_it(name, capsys):
    from hwsim.cli import main
    assert main(["estimate", str(model(f"{name}.tflite")), "--target", "hmx"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hwsim: error: an integer graph (TosaInput_0 is int8)") and \
        "--mode dequantise" in err and err.count("\n") == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", INT8_MODELS)
def test_int8_mlperf_models_run_on_hmx_in_dequantise_mode(name):
    path = model(f"{name}.tflite")
    sample = model("kws_sample_input.npy") if name == "kws_ref_model" else None
    report = hwsim.estimate(path, "hmx", mode="dequantise", check=True,
                            inputs=None if sample is None else np.load(sample))
    verdicts = int8_layers(report)
    assert verdicts and max(v.max_err for v in verdicts.values()) <= 4
    assert sum(v.exact for v in verdicts.values()) / sum(v.count for v in verdicts.values()) \
        > 0.85      # most values land on the int8 model's
    for row in report.layers:     # FP16 execution within its bound wherever one applies
        v = row.verdict
        assert v.status != "deviates" or v.narrow is None or v.narrow.status != "deviates", \
            v.brief()
    (output,) = report.output_verdicts.values()
    assert output.requantised.max_err <= 1
    if name == "kws_ref_model":     # the real sample's class, as the int8 model says
        assert report.outputs["TosaOutput_0"].argmax() == 5
    if name != "ad01_int8":
        assert any(note.startswith("the int8 softmax of ") for row in report.layers
                   for note in row.notes)


@pytest.mark.slow
def test_the_bundled_keyword_spotting_model_runs_on_hmx():
    folder = Path(__file__).resolve().parents[1] / "examples" / "models"
    report = hwsim.estimate(folder / "ds_cnn_int8.tosa", "hmx", mode="dequantise", check=True,
                            inputs=np.load(folder / "ds_cnn_int8_input.npy"))
    assert report.cycles == 44715
    assert max(v.max_err for v in int8_layers(report).values()) <= 3
    (output,) = report.output_verdicts.values()
    assert output.requantised.max_err <= 1 and output.requantised.exact >= 11
    assert report.layers[-1].notes[0].startswith("the int8 softmax of ")
