"""Whole models on SME through the scheduler: the MLPerf Tiny models (int8 bit-exact through
SMOPA/SUMOPA, fp32 in every float mode), compile and rerun, timing-only runs, the CLI and the
conformance target."""

from pathlib import Path

import numpy as np
import pytest

import hwsim
from hwsim.cli import main as cli_main
from hwsim.schedule import compile_model
from hwsim.tosa import models
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.flatbuf import write_tosa
from hwsim.tosa.reference import run_graph as run_reference
from hwsim.tosa.sut import run_graph as sut_run

from tests.models import MODELS, WHERE
SMALL = dict(width=0.25, resolution=16)


def _model(name: str) -> Path:
    path = MODELS / f"{name}.tflite"
    if not path.exists():
        pytest.skip(WHERE)
    return path


@pytest.mark.parametrize("name", [                # the two larger models run with --all
    "kws_ref_model", pytest.param("vww_96_int8", marks=pytest.mark.slow),
    pytest.param("resnet8_int8", marks=pytest.mark.slow), "ad01_int8"])
def test_mlperf_tiny_int8_models_are_bit_exact(name):
    path = _model(name)
    inputs = [np.load(MODELS / "kws_sample_input.npy")] if name == "kws_ref_model" else None
    report = hwsim.estimate(path, "sme", check=True, inputs=inputs)
    assert report.mode == "int8"
    assert all(row.verdict.status == "exact" for row in report.layers), report.table()
    assert all(v.status == "exact" for v in report.output_verdicts.values())
    if inputs:
        assert int(np.argmax(next(iter(report.outputs.values())))) == 5


@pytest.mark.parametrize("mode", ["fp32", "bf16-widening", "bf16"])
@pytest.mark.parametrize("name", ["resnet8_fp32", "ad01_fp32"])
def test_mlperf_tiny_fp32_models_meet_each_float_mode_rule(name, mode):
    report = hwsim.estimate(_model(name), "sme", mode=mode, check=True)
    assert all(row.verdict.status != "deviates" for row in report.layers), report.table()
    missed = [row for row in report.layers if "fp32-output bound" in row.verdict.detail]
    assert bool(missed) == (mode == "bf16")
    assert "check: layer" in report.table()


@pytest.mark.parametrize("mode", ["int8", "fp32", "bf16"])
def test_compiled_program_reruns_with_the_same_cycles(mode, tmp_path, capsys):
    graph = models.model("resnet8", dtype="fp32" if mode != "int8" else "int8", **SMALL)
    report = hwsim.estimate(graph, "sme", mode=mode)
    trace = compile_model(graph, tmp_path / "resnet8.trace", "sme", mode=mode)
    assert hwsim.machine("sme").run(trace).cycles == report.cycles
    assert ("\n.expect " in trace.read_text()) == (mode == "int8")
    assert cli_main(["run", str(trace)]) == 0     # int8: the .expect lines match


def test_timing_only_runs_take_the_same_cycles():
    graph = models.model("ds_cnn", dtype="int8", width=0.25, resolution=25)
    full = hwsim.estimate(graph, "sme")
    timing = hwsim.estimate(graph, "sme", numerics=False)
    assert timing.cycles == full.cycles
    assert [r.cycles for r in timing.layers] == [r.cycles for r in full.layers]


def test_cli_estimate_on_sme_and_a_wrong_mode(tmp_path, capsys):
    graph = models.model("autoencoder", dtype="fp32", width=0.25)
    path = tmp_path / "ae.tosa"
    path.write_bytes(write_tosa(graph))
    assert cli_main(["estimate", str(path), "--target", "sme", "--mode", "bf16",
                     "--check"]) == 0
    out = capsys.readouterr().out
    assert "(bf16 mode" in out and "BF16 accumulation vs the fp32-output bound" in out
    assert cli_main(["estimate", str(path), "--target", "sme", "--mode", "int8"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mode int8 takes integer graphs" in err
    assert cli_main(["estimate", str(path), "--target", "sme", "--weight-bits", "4"]) == 2
    assert "sme: weight bits: expected 8, found 4" in capsys.readouterr().err


def test_conformance_target_runs_int8_and_fp32_graphs():
    rng = np.random.default_rng(3)
    for dtype in ("int8", "fp32"):
        builder = GraphBuilder("mm")
        a = builder.input((1, 5, 8), dtype)
        if dtype == "int8":
            b = builder.const(rng.integers(-128, 128, (1, 8, 6)), "int8")
            x = rng.integers(-128, 128, (1, 5, 8)).astype(np.int8)
        else:
            b = builder.const(rng.standard_normal((1, 8, 6)), "fp32")
            x = rng.standard_normal((1, 5, 8)).astype(np.float32)
        graph = builder.build(builder.matmul(a, b))
        got = sut_run(graph, [x], "sme")[graph.outputs[0].name]
        want = run_reference(graph, [x])[graph.outputs[0].name]
        if dtype == "int8":
            assert (got == want).all()
        else:    # fp32 FMOPA sums in another order: within a few ulp of the result's scale
            assert np.abs(got - want).max() <= 8 * np.spacing(np.abs(want).max())
