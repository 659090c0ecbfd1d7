"""Models: the synthetic MLPerf Tiny look-alikes everywhere, the real ones when present."""

from pathlib import Path

import numpy as np
import pytest

from hwsim.errors import ConfigError
from hwsim.tosa import load_graph
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.cli import layer_rows
from hwsim.tosa.flatbuf import read_tosa, write_tosa
from hwsim.tosa.models import MODELS, model, sample_input, softmax_int8
from hwsim.tosa.reference import goldens, run_graph

from tests.models import MODELS as SHARED, WHERE
needs_models = pytest.mark.skipif(not SHARED.is_dir(),
                                  reason=WHERE)

# MACs of the MLPerf Tiny reference networks (equal to the imported .tflite graphs below)
MLPERF_MACS = {"ds_cnn": 2_656_768, "mobilenet_v1": 7_489_664, "resnet8": 12_501_632,
               "autoencoder": 264_192}
REAL = {"kws_ref_model": ("ds_cnn", 12), "vww_96_int8": ("mobilenet_v1", 2),
        "resnet8_int8": ("resnet8", 10), "ad01_int8": ("autoencoder", 640)}


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("dt", ["int8", "fp32"])
def test_synthetic_models_match_mlperf_shapes_and_run(name, dt):
    g = model(name, dtype=dt)
    assert g.macs == MLPERF_MACS[name]
    assert read_tosa(write_tosa(g)).macs == g.macs
    out = run_graph(g, sample_input(g))[g.outputs[0].name]
    assert out.dtype == (np.float32 if dt == "fp32" else np.int8) and np.all(np.isfinite(out))
    if name != "autoencoder":                       # classifiers end in a softmax
        probs = out.astype(np.float64) + 128 if dt == "int8" else out * 256.0
        assert abs(probs.sum() - 256) <= len(probs.ravel()) and probs.min() >= 0
    assert len(np.unique(out)) > 1                  # not saturated to one value


@pytest.mark.parametrize("name", MODELS)
def test_small_variants_are_valid_and_smaller(name):
    small = model(name, width=0.25, resolution={"ds_cnn": 25, "mobilenet_v1": 32,
                                                 "resnet8": 16, "autoencoder": 64}[name])
    assert small.macs < MLPERF_MACS[name] / 4
    run_graph(small, sample_input(small, seed=1))


def test_models_are_deterministic_and_unknown_names_fail():
    a, b = model("resnet8", seed=3), model("resnet8", seed=3)
    assert all(np.array_equal(x.data, y.data) for x, y in zip(a.constants, b.constants))
    with pytest.raises(ConfigError, match="unknown model 'lenet'"):
        model("lenet")
    with pytest.raises(ConfigError, match="int8 or fp32"):
        model("resnet8", dtype="fp16")


@pytest.mark.parametrize("scale, classes", [(0.1, 12), (0.03, 10), (0.25, 2), (0.01, 512)])
def test_int8_softmax_matches_rounded_float_softmax(scale, classes):
    b = GraphBuilder()
    x = b.input((6, classes), "int8")
    g = b.build(softmax_int8(b, x, scale, zp=3))
    ops = {op.op for op in g}
    assert {"TABLE", "CLZ", "MUL", "ARITHMETIC_RIGHT_SHIFT", "REDUCE_SUM", "REDUCE_MAX"} <= ops
    logits = np.random.default_rng(classes).integers(-128, 128, (6, classes)).astype(np.int8)
    got = run_graph(g, logits)[g.outputs[0].name].astype(int)
    real = scale * (logits.astype(float) - 3)
    p = np.exp(real - real.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    want = np.clip(np.round(p * 256) - 128, -128, 127)
    assert np.abs(got - want).max() <= 1


def test_synthetic_goldens_cover_every_layer():
    g = model("mobilenet_v1", width=0.25, resolution=32)
    values = goldens(g, sample_input(g))
    for row in layer_rows(g):
        assert values[g.operators[row["index"]].output.name].shape


@needs_models
@pytest.mark.parametrize("stem", REAL)
def test_mlperf_int8_models_import_inspect_and_run(stem):
    synthetic, classes = REAL[stem]
    g = load_graph(SHARED / f"{stem}.tflite")
    assert g.macs == MLPERF_MACS[synthetic]
    assert g.inputs[0].shape[0] == 1 and g.outputs[0].shape == (1, classes)
    rows = layer_rows(g)
    assert sum(r["macs"] for r in rows) == g.macs and g.param_bytes > 20_000
    assert {op.op for op in g} >= {"CONV2D", "RESCALE"}
    out = run_graph(g, sample_input(g))[g.outputs[0].name]
    assert out.shape == (1, classes) and out.dtype == np.int8


@needs_models
def test_kws_reference_predicts_class_5():
    g = load_graph(SHARED / "kws_ref_model.tflite")
    x = np.load(SHARED / "kws_sample_input.npy")
    out = run_graph(g, x)[g.outputs[0].name]
    assert int(np.argmax(out)) == 5 and out[0, 5] == 127


@needs_models
@pytest.mark.parametrize("stem, classes", [("resnet8_fp32", 10), ("ad01_fp32", 640)])
def test_mlperf_fp32_models_import_and_run(stem, classes):
    g = load_graph(SHARED / f"{stem}.tflite")
    assert g.inputs[0].dtype.name == "fp32" and g.outputs[0].shape == (1, classes)
    out = run_graph(g, sample_input(g))[g.outputs[0].name]
    assert np.all(np.isfinite(out))
    if classes == 10:
        assert abs(float(out.sum()) - 1) < 1e-5        # ends in a softmax


@needs_models
def test_docs_graph_example_runs(monkeypatch):
    page = (Path(__file__).resolve().parents[1] / "docs" / "tosa.md").read_text()
    section = page[page.index("## The graph IR"):]
    begin = section.index("```python\n") + len("```python\n")
    code = section[begin:section.index("```\n", begin)].replace("../shared/models", str(SHARED))
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    scope: dict = {}
    exec(compile(code, "docs/tosa.md", "exec"), scope)
    assert int(np.argmax(list(scope["out"].values())[0])) == 5
