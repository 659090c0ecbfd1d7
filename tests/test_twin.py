"""Whole models on both timing engines: the compiled default and its simpy reference twin give
identical cycles, per-layer attribution (cycles, spans, bytes per level), unit and port
statistics, per-layer outputs and verdicts. Small programs are compared on every run of the
test suite (``conftest.py``); these are the programs too large for that."""

import numpy as np
import pytest

import hwsim
from hwsim.schedule import estimate
from hwsim.tosa import models
from tests.models import model

SMALL = dict(width=0.25, resolution=16)
CASES = [("gap9", "exact"), ("gap9", "ne16"), ("sme", "int8"), ("hmx", "dequantise"),
         ("gap9", "cluster")]
FLOAT_CASES = [("sme", "fp32"), ("sme", "bf16-widening"), ("sme", "bf16"), ("hmx", None)]


def same(a, b) -> None:
    assert a.cycles == b.cycles
    assert a.result.records.differences(b.result.records) == []
    assert a.result.stats == b.result.stats
    for x, y in zip(a.layers, b.layers):
        assert x == y, x.name          # cycles, span, bytes, split, notes, verdict
    assert a.outputs.keys() == b.outputs.keys()
    for name in a.outputs:
        assert np.array_equal(a.outputs[name], b.outputs[name])


def twins(graph, target, mode, **options):
    runs = [estimate(graph, target, mode=mode, check=True, engine=engine, **options)
            for engine in ("compiled", "simpy")]
    same(*runs)
    return runs[0]


@pytest.mark.parametrize("target,mode", CASES)
@pytest.mark.parametrize("name", ["ds_cnn", pytest.param("resnet8", marks=pytest.mark.slow)])
def test_small_int8_models(name, target, mode):
    twins(models.model(name, **SMALL), target, mode)


@pytest.mark.parametrize("target,mode", FLOAT_CASES)
def test_small_fp32_model(target, mode):
    twins(models.model("resnet8", dtype="fp32", **SMALL), target, mode)


@pytest.mark.slow
@pytest.mark.parametrize("target,mode", CASES[:3] + CASES[4:])
@pytest.mark.parametrize("name", ["kws_ref_model", "vww_96_int8", "resnet8_int8", "ad01_int8"])
def test_mlperf_tiny_int8_models(name, target, mode):
    twins(model(f"{name}.tflite"), target, mode)


@pytest.mark.slow
@pytest.mark.parametrize("target,mode", FLOAT_CASES)
@pytest.mark.parametrize("name", ["resnet8_fp32", "ad01_fp32"])
def test_mlperf_tiny_fp32_models(name, target, mode):
    twins(model(f"{name}.tflite"), target, mode)


@pytest.mark.slow
def test_mlperf_tiny_int8_autoencoder_on_hmx():
    twins(model("ad01_int8.tflite"), "hmx", "dequantise")


def test_timing_only_runs_agree():
    graph = models.model("resnet8", **SMALL)
    runs = [estimate(graph, "gap9", numerics=False, engine=e) for e in ("compiled", "simpy")]
    assert runs[0].result.records.differences(runs[1].result.records) == []


def test_the_fixtures_twin_copies_every_byte_and_its_comparison_sees_one_differ():
    from tests.conftest import PAGE, state, state_differences, twin_of
    m = hwsim.machine("gap9")
    l2 = m.memory("l2")
    rng = np.random.default_rng(0)
    for addr in (l2.base, l2.base + 5 * PAGE + 3, l2.end - 7):     # first, middle, tail bytes
        l2.write(addr, rng.integers(1, 256, 7 if addr == l2.end - 7 else 100, np.uint8))
    twin, _ = twin_of(m, [])
    assert twin.memory("l2").data is not l2.data
    assert state_differences(state(m), state(twin)) == []
    twin.memory("l2").write(l2.base + 9 * PAGE + 1, b"\x01")
    assert state_differences(state(m), state(twin)) == ["machine['spaces']['l2'].data"]
