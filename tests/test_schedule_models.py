"""Whole models through the GAP9 scheduler: bit-exact in exact mode, bounded in NE16 mode,
timing-only runs with the same cycles, compiled traces with the same cycles, and the four
MLPerf Tiny int8 models when present (tests/models.py says where)."""


import numpy as np
import pytest

import hwsim
from hwsim.schedule import compile_model, estimate
from hwsim.tosa.models import model

from tests.models import MODELS, WHERE
SMALL = {"ds_cnn": dict(width=0.25, resolution=16),
         "mobilenet_v1": dict(width=0.25, resolution=24),
         "resnet8": dict(width=0.5, resolution=12),
         "autoencoder": dict(width=0.25, resolution=64)}


@pytest.fixture(scope="module", params=list(SMALL))
def graph(request):
    return model(request.param, **SMALL[request.param])


def verdicts(report):
    return [r.verdict for r in report.layers] + list(report.output_verdicts.values())


def test_synthetic_models_are_bit_exact_in_exact_mode(graph):
    report = estimate(graph, "gap9", check=True)
    assert all(v.status == "exact" for v in verdicts(report)), \
        [str(v) for v in verdicts(report) if v.status != "exact"]
    assert sum(r.cycles for r in report.layers) == pytest.approx(report.cycles)
    assert report.macs == graph.macs


def test_ne16_mode_reports_its_deviation_and_is_faster(graph):
    exact = estimate(graph, "gap9")
    native = estimate(graph, "gap9", mode="ne16", check=True)
    # each layer on its own inputs within 1 LSB; the outputs accumulate the layers' errors
    assert max(r.verdict.max_err for r in native.layers) <= 1
    assert all(v.max_err <= 8 for v in native.output_verdicts.values())
    assert native.cycles < exact.cycles
    assert any("deviates from the RESCALE" in n for r in native.layers for n in r.notes)


def test_timing_only_runs_give_the_same_cycles(graph):
    full = estimate(graph, "gap9")
    timing = estimate(graph, "gap9", numerics=False)
    assert timing.cycles == full.cycles
    assert [r.cycles for r in timing.layers] == [r.cycles for r in full.layers]
    assert timing.outputs == {}


def test_a_compiled_trace_runs_with_the_same_cycles(graph, tmp_path):
    path = compile_model(graph, tmp_path / "model.trace")
    result = hwsim.machine("gap9").run(path)
    assert result.cycles == estimate(graph, "gap9").cycles
    assert result.expect_failures == []
    assert any(line.startswith(".expect") for line in path.read_text().splitlines())


def test_layer_cycles_add_up_and_attribution_is_sane():
    report = estimate(model("resnet8", width=0.5, resolution=12), "gap9")
    assert sum(r.cycles for r in report.layers) == pytest.approx(report.cycles)
    for r in report.layers:
        assert sum(r.split.values()) == pytest.approx(r.cycles)
        assert r.overlap is None or 0.0 <= r.overlap <= 1.0
        if r.span:
            assert 0 <= r.span[0] <= r.span[1] <= report.cycles
    convs = [r for r in report.layers if r.kind.startswith("CONV2D")]
    assert all(r.bytes["MRAM"] > 0 and r.bytes["L1"] > 0 for r in convs)
    assert report.totals["levels"]["MRAM"]["bytes"] == sum(r.bytes["MRAM"] for r in
                                                          report.layers)


real = pytest.mark.skipif(not MODELS.is_dir(), reason=WHERE)


@real
@pytest.mark.parametrize("name", [                # the two larger models run with --all
    "kws_ref_model", pytest.param("vww_96_int8", marks=pytest.mark.slow),
    pytest.param("resnet8_int8", marks=pytest.mark.slow), "ad01_int8"])
def test_mlperf_tiny_models_are_bit_exact(name):
    sample = MODELS / "kws_sample_input.npy"
    inputs = np.load(sample) if name == "kws_ref_model" else None
    report = estimate(MODELS / f"{name}.tflite", "gap9", check=True, inputs=inputs)
    assert all(v.status == "exact" for v in verdicts(report))
    native = estimate(MODELS / f"{name}.tflite", "gap9", mode="ne16", check=True,
                      inputs=inputs)
    assert max(r.verdict.max_err for r in native.layers) <= 1
    if name == "kws_ref_model":
        assert int(np.argmax(report.outputs["TosaOutput_0"])) == 5
        assert int(np.argmax(native.outputs["TosaOutput_0"])) == 5
