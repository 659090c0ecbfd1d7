"""Every file under examples/sme runs and is checked: data, kernels, microbenchmarks."""

import importlib.util
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import hwsim
from hwsim.cli import main
from tests import oracle

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "sme"
TRACES = sorted(EXAMPLES.rglob("*.trace"))


def _generator():
    spec = importlib.util.spec_from_file_location("sme_generate", EXAMPLES / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()


def test_committed_files_are_what_the_script_generates():
    for name, content in GEN.generate().items():
        path = EXAMPLES / name
        if isinstance(content, str):
            assert path.read_text() == content, name
        else:
            stored = np.load(path)
            assert stored.dtype == content.dtype and np.array_equal(stored, content), name
    generated = {EXAMPLES / name for name in GEN.generate()} | {EXAMPLES / "generate.py"}
    assert set(p for p in EXAMPLES.rglob("*") if p.is_file()) <= generated


@pytest.mark.parametrize("trace", TRACES, ids=[t.name for t in TRACES])
def test_every_trace_runs_and_meets_its_expectations(trace, capsys):
    assert main(["run", str(trace)]) == 0
    assert "MISMATCH" not in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(GEN.MICROBENCH))
def test_microbenchmarks_reproduce_the_m4_table(name):
    _op, chains, cpi = GEN.MICROBENCH[name]
    result = hwsim.machine("sme").run(EXAMPLES / "microbench" / f"{name}.trace")
    mx = result.log("mx")
    starts = [start for start, *_ in mx]
    assert len(starts) == GEN.MICROBENCH_OPS
    assert (starts[-1] - starts[chains - 1]) / (len(starts) - chains) == cpi


def _bf16(bits):
    return oracle.fmt_value(int(bits), 8, 7)


def test_bfmopa_tile_expected_output_matches_exact_fractions():
    at, b, c = (np.load(EXAMPLES / "data" / f"bf16_{n}.npy") for n in ("at", "b", "c"))
    expected = np.load(EXAMPLES / "data" / "bf16_expected.npy")
    for i in range(32):
        for j in range(32):
            acc = int(c[i, j])
            if j < 30:   # columns 30 and 31 are predicated off
                for k in range(at.shape[0]):
                    exact = _bf16(acc) + _bf16(at[k, i]) * _bf16(b[k, j])
                    acc = oracle.round_to(exact, 8, 7)
            assert expected[i, j] == acc, (i, j)


def test_fp32_gemm_expected_output_matches_exact_fractions_and_float64():
    at, b = (np.load(EXAMPLES / "data" / f"gemm_{n}.npy") for n in ("at", "b"))
    expected = np.load(EXAMPLES / "data" / "gemm_expected.npy")
    rng = np.random.default_rng(0)
    for i, j in rng.integers(0, 32, (40, 2)):
        acc = Fraction(0)
        for k in range(at.shape[0]):
            acc = oracle.fmt_value(oracle.round_to(acc + Fraction(float(at[k, i]))
                                                   * Fraction(float(b[k, j])), 8, 23), 8, 23)
        assert Fraction(float(expected[i, j])) == acc
    np.testing.assert_allclose(expected, at.T.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-5, atol=1e-5)


def test_gemm_uses_all_four_tiles_and_leaves_them_in_za():
    m = hwsim.machine("sme")
    m.run(EXAMPLES / "gemm_fp32.trace")
    expected = np.load(EXAMPLES / "data" / "gemm_expected.npy")
    for tile in range(4):
        rows, cols = slice(16 * (tile // 2), 16 * (tile // 2) + 16), \
            slice(16 * (tile % 2), 16 * (tile % 2) + 16)
        assert np.array_equal(m.state.read_tile(4, tile).view(np.float32), expected[rows, cols])
