"""Whole float models on HMX through the scheduler: estimate with --check, compile and rerun,
timing-only runs, the conformance target, and what HMX refuses."""


import numpy as np
import pytest

import hwsim
from hwsim.cli import main as cli_main
from hwsim.errors import ScheduleError
from hwsim.schedule import compile_model, prepare
from hwsim.schedule.check import check, retyped
from hwsim.schedule.run import simulate
from hwsim.tosa import models
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.reference import run_graph as run_reference
from hwsim.tosa.sut import run_graph as sut_run

from tests.models import MODELS, WHERE
SMALL = {"resnet8": dict(width=0.5, resolution=16), "ds_cnn": dict(width=0.25, resolution=25),
         "mobilenet_v1": dict(width=0.25, resolution=32),
         "autoencoder": dict(width=0.25, resolution=64)}


def explained(report) -> None:
    """Every layer exact or compliant in FP32, or compliant as an FP16 operator."""
    assert report.layers
    for row in report.layers:
        v = row.verdict
        assert v.status != "deviates" or (v.narrow is not None and
                                          v.narrow.status != "deviates"), str(v)


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.slow)
                                  if name == "mobilenet_v1" else name for name in sorted(SMALL)])
def test_synthetic_fp32_models_check(name):
    graph = models.model(name, dtype="fp32", **SMALL[name])
    report = hwsim.estimate(graph, "hmx", check=True)
    explained(report)
    assert any(row.verdict.status == "deviates" for row in report.layers)  # FP16 is coarser
    assert sum(row.cycles for row in report.layers) == pytest.approx(report.cycles)
    out = graph.outputs[0].name
    want = run_reference(graph, [models.sample_input(graph)])[out].astype(np.float64)
    error = np.abs(report.outputs[out] - want).max() / np.abs(want).max()
    assert error < 2 ** -7  # a few FP16 ulps of the output's scale after the whole model


@pytest.mark.parametrize("name", [pytest.param("resnet8_fp32", marks=pytest.mark.slow),
                                  "ad01_fp32"])
def test_mlperf_tiny_fp32_models_check(name):
    path = MODELS / f"{name}.tflite"
    if not path.exists():
        pytest.skip(WHERE)
    explained(hwsim.estimate(path, "hmx", check=True))


@pytest.mark.slow
def test_compiled_program_reruns_with_the_same_cycles(tmp_path):
    graph = models.model("resnet8", dtype="fp32", **SMALL["resnet8"])
    report = hwsim.estimate(graph, "hmx")
    trace = compile_model(graph, tmp_path / "resnet8.trace", "hmx")
    machine = hwsim.machine("hmx")
    result = machine.run(trace)
    assert result.cycles == report.cycles
    out = graph.outputs[0]
    lowered = prepare(graph, "hmx").lowered
    place = lowered.outputs[out.name]
    got = place.decode(machine.memory("ddr").read(place.addr, place.nbytes))
    assert (got == report.outputs[out.name]).all()
    assert cli_main(["run", str(trace)]) == 0


def test_timing_only_runs_take_the_same_cycles():
    graph = models.model("ds_cnn", dtype="fp32", **SMALL["ds_cnn"])
    full = hwsim.estimate(graph, "hmx")
    timing = hwsim.estimate(graph, "hmx", numerics=False)
    assert timing.cycles == full.cycles and [r.cycles for r in timing.layers] == \
        [r.cycles for r in full.layers]


def test_a_wrong_result_is_outside_both_bounds():
    graph = models.model("autoencoder", dtype="fp32", **SMALL["autoencoder"])
    _, _, low, options, machine, params, layers, lowered = prepare(graph, "hmx")
    x = models.sample_input(graph)
    feeds = {graph.inputs[0].name: x}
    sim = simulate(lowered, machine, feeds, params)
    conv = next(layer for layer in layers if layer.ops[0].op == "CONV2D")
    sim.values[conv.index] = sim.values[conv.index].copy()
    sim.values[conv.index].reshape(-1)[3] += 1.0
    verdict = check(graph, layers, sim.values, sim.outputs, feeds, low, options).layers
    assert verdict[conv.index].narrow.status == "deviates"
    assert all(v.narrow is None or v.narrow.status != "deviates"  # later ones read the error
               for i, v in verdict.items() if i < conv.index)


def test_retyped_operators_round_constants_and_accumulate_in_fp32():
    builder = GraphBuilder("conv")
    x = builder.input((1, 4, 4, 8), "fp32")
    y = builder.conv2d(x, builder.const(np.full((8, 1, 1, 8), 0.1, np.float32), "fp32"),
                       builder.const(np.zeros(8, np.float32), "fp32"))
    graph = builder.build(builder.clamp(y, 0.0, float(np.finfo(np.float32).max)))
    conv, clamp = retyped(list(graph), "fp16", "fp32")
    assert conv.output.dtype.name == "fp16" and conv.acc_type == "fp32"
    assert conv.weight.data.dtype == np.float16 and conv.weight.data[0, 0, 0, 0] == np.float16(0.1)
    assert clamp.max_val == float("inf") and clamp.inputs[0] is conv.output


def test_conformance_target_and_refusals():
    builder = GraphBuilder("ops")
    a, b = builder.input((1, 3, 8), "fp32"), builder.input((1, 3, 8), "fp32")
    graph = builder.build(builder.unary("EXP", builder.sub(a, b)))
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((1, 3, 8)).astype(np.float32) for _ in range(2)]
    got = sut_run(graph, inputs, "hmx")[graph.outputs[0].name]
    want = np.exp((inputs[0].astype(np.float16) - inputs[1].astype(np.float16)).astype(
        np.float16).astype(np.float64)).astype(np.float16)
    assert (got == want).all()
    builder = GraphBuilder("mm")
    a, b = builder.input((1, 4, 8), "fp32"), builder.input((1, 8, 4), "fp32")
    with pytest.raises(ScheduleError, match="MATMUL.*B.*not constants"):
        hwsim.estimate(builder.build(builder.matmul(a, b)), "hmx")
