"""Every HMX example trace runs, passes its .expect, and matches values computed here with exact
rationals and the oracle (not by the machine); the example data are reproducible."""

import importlib.util
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import hwsim
from hwsim.cli import main as cli_main
from tests import hmx_oracle as O

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "hmx"
TRACES = sorted(EXAMPLES.glob("*.trace"))
ONE = 0x3C00 << 4  # scale 1.0 as FP16 with 4 extra bits
BIAS = dict(input_bias=0, shape=0, scale=ONE, output_bias=0)
PLAIN = dict(rnd=0, ovf=0, fb_op=0, fb_dest=0)


def a(s: int, c: int, offset: int = 0) -> Fraction:
    """The manual's activation: s + 0.01 c rounded to FP16 (write_act_vtcm)."""
    return Fraction(float(np.float16(s + c * 0.01 + offset)))


def convert(acc: Fraction, prev: int = 0, rs: dict = PLAIN, bias: dict = BIAS) -> int:
    """FP16+4 convert state of one exact accumulator value, USR = 0 (the default)."""
    bits = O.oracle.round_to(acc, 7, 29) if acc else 0
    return O.convert_cell(bits, bias, prev, rs, 0, 0, 7, 29, "abs")


def single_source(s: int) -> Fraction:
    """Figure 24, Y = 5 under 11100: accumulator spatial s is first-crouton spatial s + 20, or
    for s >= 12 second-crouton spatial s - 12 (whose values are 32 higher)."""
    return (lambda c: a(s + 20, c)) if s < 12 else (lambda c: a(s - 12, c, 32))


MANUAL = {  # trace: [(output address, ACC(s, o))]
    "basic_multiply": [(0x1800, lambda s, o: a(s, o) * o)],
    "channel_range": [(0x1800, lambda s, o: a(s, o) * o if 8 <= o <= 15 else 0)],
    "deep_three": [(0x3800, lambda s, o: 3 * a(s, o) * o)],
    "deep_partial": [(0x3800, lambda s, o: a(s, o) * o * ((o >= 24) + 1 + (o <= 15)))],
    "weight_deep": [(0x2000, lambda s, o: a(s, o) * o),
                    (0x2800, lambda s, o: a(s, o) * (o + 32))],
    "single_y5": [(0x2000, lambda s, o: single_source(s)(o) * o)],
}


def result_crouton(m, addr):
    """The output crouton as [s][o] FP16 bits, read in the manual's loop order (Figure 19)."""
    words = m.memory("vtcm").read(addr, 2048).view(np.uint16)
    cells = np.zeros((32, 32), dtype=np.int64)
    i = 0
    for vec in range(16):
        for ch in range(32):
            for sp in range(2):
                cells[vec * 2 + sp, ch] = words[i]
                i += 1
    return cells


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.stem)
def test_example_passes_its_expect(trace):
    assert ".expect" in trace.read_text()
    result = hwsim.machine("hmx").run(trace)
    assert result.expect_failures == []


@pytest.mark.parametrize("name", sorted(MANUAL))
def test_manual_examples_against_exact_values(name):
    m = hwsim.machine("hmx")
    m.run(EXAMPLES / f"{name}.trace")
    for addr, acc in MANUAL[name]:
        got = result_crouton(m, addr)
        want = [[convert(Fraction(acc(s, o))) >> 4 for o in range(32)] for s in range(32)]
        assert got.tolist() == want


def test_feedback_example_against_exact_values():
    m = hwsim.machine("hmx")
    m.run(EXAMPLES / "feedback_scale_max.trace")
    got = result_crouton(m, 0x1800)
    first = dict(PLAIN, rnd=1)
    second = dict(PLAIN, fb_op=1, fb_dest=2)
    for s in range(32):
        for o in range(32):
            acc = a(s, o) * o
            assert got[s, o] == convert(acc, convert(acc, 0, first), second) >> 4, (s, o)
    assert (got == 0x7FFF).any() and (got < 0x7C00).any()  # saturated and in range, USR[20] = 0


def test_layer_example_against_exact_values():
    m = hwsim.machine("hmx")
    result = m.run(EXAMPLES / "dma_hvx_overlap.trace")
    data = EXAMPLES / "data"
    x8 = (np.load(data / "layer_x.npy").astype(np.float64) * 8).astype(np.int64)
    w16 = (np.load(data / "layer_w.npy").astype(np.float64) * 16).astype(np.int64)
    rows = np.load(data / "layer_bias.npy").view(np.uint16).astype(np.int64)
    sums = np.einsum("hwc,oc->hwo", x8, w16)  # exact integers, units of 1/128
    got = m.memory("ddr").read(0x8001_0000, 8192).view(np.uint16).reshape(8, 8, 64)
    for (h, w, o), total in np.ndenumerate(sums):
        bias = dict(input_bias=rows[o, 0] << 5, shape=0, scale=rows[o, 1] << 4,
                    output_bias=rows[o, 2] << 4)
        y = convert(Fraction(int(total), 128), bias=bias) >> 4
        relu = 0 if y & 0x8000 else y  # max(y, +0): negatives and -0 become +0
        assert got[h, w, o] == relu, (h, w, o)
    # a convert (clear and swap) overlaps the multiply into the other accumulator
    logs = {u: result.log(u) for u in result.unit_names}
    mpy = [(s, s + c, label[-4:]) for s, c, label, _ in logs["mpy"]]
    cvt = [(s, s + c, label[4:8]) for s, c, label, _ in logs["cvt"] if label.startswith("cvt ")]
    assert any(c0 < m1 and m0 < c1 and acc_c != acc_m
               for c0, c1, acc_c in cvt for m0, m1, acc_m in mpy)


def test_quick_start_command(capsys):
    assert cli_main(["run", str(EXAMPLES / "basic_multiply.trace")]) == 0
    assert "\ncycles       72\n" in capsys.readouterr().out


def test_example_data_is_reproducible(tmp_path):
    spec = importlib.util.spec_from_file_location("make_examples", EXAMPLES / "make_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["make_examples.py", str(tmp_path)]) == 0
    made = sorted(p.name for p in tmp_path.iterdir())
    assert made == sorted(p.name for p in (EXAMPLES / "data").iterdir())
    for name in made:
        assert (tmp_path / name).read_bytes() == (EXAMPLES / "data" / name).read_bytes(), name
