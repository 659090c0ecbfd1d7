"""GAP9 cycles pinned: each example trace and the bundled keyword-spotting model in each numeric
mode. A change of the timing model changes these numbers; update them on purpose, saying why in
the commit."""

from pathlib import Path

import pytest

import hwsim

ROOT = Path(__file__).resolve().parents[1]
TRACES = {"conv1x1": 4305, "conv3x3": 16078, "depthwise": 2581}
MODEL = ROOT / "examples" / "models" / "ds_cnn_int8.tosa"
# (mode, weight bits) -> total cycles of the bundled DS-CNN (timing only: the same cycles)
MODES = {("exact", 8): 369308, ("ne16", 8): 346876, ("ne16", 4): 327608}


def test_every_example_trace_is_pinned():
    assert set(TRACES) == {p.stem for p in (ROOT / "examples" / "gap9").glob("*.trace")}


@pytest.mark.parametrize("name", list(TRACES))
def test_example_trace_cycles(name):
    result = hwsim.machine("gap9").run(ROOT / "examples" / "gap9" / f"{name}.trace")
    assert result.cycles == TRACES[name]


@pytest.mark.parametrize("mode, bits", list(MODES))
def test_bundled_model_cycles(mode, bits):
    report = hwsim.estimate(MODEL, "gap9", mode=mode, weight_bits=bits, numerics=False)
    assert report.cycles == MODES[(mode, bits)]
