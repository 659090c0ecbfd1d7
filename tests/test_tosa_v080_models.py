"""TOSA 0.80 acceptance on the MLPerf Tiny int8 models (whole-model estimates: slow).

The real 0.80 KWS flatbuffer estimates exactly as its .tflite does on every machine and mode
that runs int8; each model written as 0.80 (flatbuffer and MLIR text) and read back estimates
exactly as before.
"""

import numpy as np
import pytest

import hwsim
from hwsim.errors import HwsimError
from hwsim.tosa import load_graph
from hwsim.tosa.loaders import graph_bytes

from tests.models import model

pytestmark = pytest.mark.slow

INT8_MACHINES = [("gap9", "exact"), ("gap9", "ne16"), ("sme", "int8"), ("hmx", "dequantise")]
MODELS = ["kws_ref_model", "vww_96_int8", "resnet8_int8", "ad01_int8"]


def outcome(graph, target, mode, inputs=None):
    """What ``hwsim estimate --check`` reports: cycles, and per layer the fused operators,
    cycles, bytes and verdict; or the one-line error when the machine cannot run the graph."""
    try:
        r = hwsim.estimate(graph, target, mode=mode, check=True, inputs=inputs)
    except HwsimError as exc:
        return str(exc)
    return (r.cycles, [(row.kind, row.cycles, row.bytes, str(row.verdict), row.verdict.status)
                       for row in r.layers],
            {name: str(v) for name, v in r.output_verdicts.items()})


@pytest.mark.parametrize("target, mode", INT8_MACHINES)
def test_kws_080_flatbuffer_estimates_as_its_tflite(target, mode):
    x = np.load(model("kws_sample_input.npy"))
    old = outcome(load_graph(model("kws_int8_v080.tosa")), target, mode, x)
    new = outcome(load_graph(model("kws_ref_model.tflite")), target, mode, x)
    assert old == new
    assert old[0] > 0 and len(old[1]) == (20 if target == "hmx" else 26)   # HMX fuses more
    if (target, mode) in (("gap9", "exact"), ("sme", "int8")):
        assert all(status == "exact" for *_, status in old[1])


@pytest.mark.parametrize("name", MODELS)
def test_models_round_trip_through_080(name):
    graph = load_graph(model(f"{name}.tflite"))
    flat = load_graph(graph_bytes(graph, "0.80"))
    text = load_graph(graph_bytes(graph, "0.80", mlir=True))
    assert flat.version == "0.80.0" and text.version == "0.80"
    for target, mode in [("gap9", "exact"), ("sme", "int8"), ("hmx", "dequantise")]:
        want = outcome(graph, target, mode)
        assert target == "hmx" or not isinstance(want, str), want    # HMX: where it runs
        assert outcome(flat, target, mode) == want
        assert outcome(text, target, mode) == want
