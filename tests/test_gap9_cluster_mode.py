"""GAP9 cluster mode (every layer on the worker cores) and the cluster kernels' cost model:
bit-exact models, pinned cycles, the costs the model must see (idle SIMD lanes, stride 2, load
imbalance, per-channel set-up), the per-layer set-up and the L2-only residency."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from hwsim.errors import ConfigError
from hwsim.schedule import estimate
from hwsim.targets.gap9 import cluster_cost
from hwsim.targets.gap9.params import PARAMS
from hwsim.timing.params import ParamSet
from hwsim.tosa.models import model

from tests.models import MODELS, WHERE
from tests.test_schedule_models import SMALL, verdicts

real = pytest.mark.skipif(not MODELS.is_dir(), reason=WHERE)
BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_calibration.py"
T = ParamSet(PARAMS)


@pytest.mark.parametrize("name", list(SMALL))
def test_synthetic_models_are_bit_exact_on_the_cores(name):
    graph = model(name, **SMALL[name])
    report = estimate(graph, "gap9", mode="cluster", check=True)
    assert all(v.status == "exact" for v in verdicts(report))
    assert all("ne16" not in r.units for r in report.layers)
    assert report.macs == graph.macs


@real
@pytest.mark.parametrize("name", ["kws_ref_model", "vww_96_int8", "resnet8_int8",
                                  "ad01_int8"])
def test_mlperf_tiny_models_are_bit_exact_on_the_cores(name):
    inputs = np.load(MODELS / "kws_sample_input.npy") if name == "kws_ref_model" else None
    report = estimate(MODELS / f"{name}.tflite", "gap9", mode="cluster", check=True,
                      inputs=inputs)
    assert all(v.status == "exact" for v in verdicts(report))
    assert not any("ne16" in r.units for r in report.layers)


@real
def test_resnet8_cluster_cycles_are_pinned():
    """Timing changes are deliberate: rerun benchmarks/bench_calibration.py and update."""
    path = MODELS / "resnet8_int8.tflite"
    assert estimate(path, "gap9", mode="cluster", numerics=False).cycles == 2_050_525
    as_built = estimate(path, "gap9", mode="cluster", numerics=False,
                        params={"l1_residency": "none"})
    assert as_built.cycles == 2_086_252


def test_small_resnet8_cluster_cycles_are_pinned():
    report = estimate(model("resnet8", **SMALL["resnet8"]), "gap9", mode="cluster",
                      numerics=False)
    assert report.cycles == 189_985


def test_cluster_mode_takes_8_bit_weights_only():
    with pytest.raises(ConfigError, match="cluster mode runs int8 weights; weight bits: "
                                          "expected 8, found 4"):
        estimate(model("resnet8", **SMALL["resnet8"]), "gap9", mode="cluster", weight_bits=4)


def test_l1_residency_none_moves_every_activation_through_l2():
    graph = model("resnet8", **SMALL["resnet8"])
    kept = estimate(graph, "gap9", mode="cluster", check=True)
    moved = estimate(graph, "gap9", mode="cluster", check=True,
                     params={"l1_residency": "none"})
    assert all(v.status == "exact" for v in verdicts(moved))
    assert moved.totals["levels"]["L2"]["bytes"] > 4 * kept.totals["levels"]["L2"]["bytes"]
    assert moved.cycles > kept.cycles


def test_every_layer_pays_its_set_up():
    graph = model("resnet8", **SMALL["resnet8"])
    base = estimate(graph, "gap9", mode="cluster", numerics=False)
    more = estimate(graph, "gap9", mode="cluster", numerics=False,
                    params={"layer_setup_cycles": T.layer_setup_cycles + 100})
    active = sum(1 for r in base.layers if r.units)
    assert more.cycles - base.cycles == 100 * active


# -- the cost model --------------------------------------------------------------------------------
def conv(out, kernel, k_in, stride=(1, 1), **override):
    t = T
    if override:
        t = ParamSet(PARAMS)
        t.update(override)
    return cluster_cost.conv_cycles(t, out, kernel, k_in, stride)


def test_narrow_input_channels_leave_simd_lanes_idle():
    # 1, 3 and 4 input channels take one sdot per tap: the same time
    assert conv((1, 8, 8, 16), (3, 3), 1) < conv((1, 8, 8, 16), (3, 3), 3) \
        < conv((1, 8, 8, 16), (3, 3), 4)
    lanes = (1, 8, 8, 16)
    per_tap = [conv(lanes, (3, 3), k, conv_channel_setup_cycles=0) for k in (1, 3, 4, 5)]
    assert per_tap[0] == per_tap[1] == per_tap[2] < per_tap[3]


def test_stride_2_costs_more_per_output():
    s1 = conv((1, 8, 8, 16), (3, 3), 16)
    s2 = conv((1, 8, 8, 16), (3, 3), 16, (2, 2))
    sdots = 9 * 4 * 8 * 8 * 2
    assert s2 - s1 == pytest.approx(sdots * T.conv_sdot_cycles * T.conv_stride2_extra, abs=1)


def test_the_busiest_core_sets_the_time():
    # 9 output channels on 8 cores: one core takes two (split by row is worse for 1 row)
    assert conv((1, 1, 16, 9), (3, 3), 8) == conv((1, 1, 16, 16), (3, 3), 8)
    # 4 channels, 16 rows: split by row, 2 rows per core
    by_row = conv((1, 16, 4, 4), (1, 1), 8)
    per_output = T.conv_output_cycles + 2 * T.conv_sdot_cycles
    assert by_row == pytest.approx(2 * 4 * 4 * per_output, abs=1)


def test_1x1_stride_2_pays_the_gather_and_no_channel_set_up():
    s1 = conv((1, 8, 8, 16), (1, 1), 32)
    s2 = conv((1, 8, 8, 16), (1, 1), 32, (2, 2))
    assert s2 - s1 == pytest.approx(8 * 8 * 32 * T.conv_gather_cycles, abs=1)
    assert s1 == pytest.approx(2 * 64 * (T.conv_output_cycles + 8 * T.conv_sdot_cycles), abs=1)


def test_pooling_cost():
    cycles = cluster_cost.pool_cycles(T, (1, 1, 1, 64), (8, 8))
    assert cycles == pytest.approx(8 * (T.pool_channel_cycles + 64 * T.pool_element_cycles),
                                   abs=1)


@real
@pytest.mark.parametrize("name", ["resnet8", "kws"])
def test_the_calibration_set_is_within_the_acceptance(name, monkeypatch):
    """benchmarks/bench_calibration.py's judged rows: median |error| <= 15%, none past 30%."""
    monkeypatch.syspath_prepend(str(BENCH.parent))      # its ``common``
    spec = importlib.util.spec_from_file_location("bench_calibration", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.run_set(name)
    assert result["accepted"], bench.table(name, result)
    assert result["median_abs_error"] < 0.07 and result["max_abs_error"] < 0.12
