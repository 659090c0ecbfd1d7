"""The GAP9 examples: committed data match their generator, and each runs bit-exactly."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import hwsim

HERE = Path(__file__).resolve().parents[1] / "examples" / "gap9"
spec = importlib.util.spec_from_file_location("make_examples", HERE / "make_examples.py")
make_examples = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_examples)
GENERATED = make_examples.generate()


@pytest.mark.parametrize("name", list(GENERATED))
def test_committed_files_are_what_the_generator_makes(name):
    text, files = GENERATED[name]
    assert (HERE / f"{name}.trace").read_text() == text
    for key, array in files.items():
        committed = np.load(HERE / f"{name}_{key}.npy")
        assert committed.dtype == array.dtype and np.array_equal(committed, array)


@pytest.mark.parametrize("name", list(GENERATED))
def test_example_runs_bit_exactly(name):
    machine = hwsim.machine("gap9")
    result = machine.run(HERE / f"{name}.trace")
    assert result.expect_failures == []
    expected = np.load(HERE / f"{name}_expected.npy")
    out = machine.memory("l2").read(make_examples.L2 + make_examples.SLOTS["output"],
                                    expected.nbytes)
    assert np.array_equal(out, expected.reshape(-1).view(np.uint8))
    units = result.stats["units"]
    assert units["ne16"]["macs"] > 0 and result.cycles > units["ne16"]["busy"]


def test_every_example_file_is_used():
    names = {p.name for p in HERE.iterdir() if p.suffix in (".trace", ".npy")}
    used = {f"{n}.trace" for n in GENERATED} | {f"{n}_{k}.npy" for n, (_, files) in
                                                  GENERATED.items() for k in files}
    assert names == used
