"""The test run's options, and a check that every program runs alike on both timing engines.

``python -m pytest`` runs the quick loop: tests marked ``slow`` are deselected and the property
tests run the quick hypothesis profile (``tests/profiles.py``). ``python -m pytest --all`` runs
every test with the thorough profile (CI does); ``-m slow`` selects the slow ones alone.

Every program a test runs on a machine also runs on the other timing engine.

The compiled engine is the default; the simpy engine is its reference twin. Whenever a test runs
a program of at most ``TWIN_OPS`` ops, this fixture runs it first on a copy of the machine with
the other engine and checks that both give identical records (cycles, every op's start, end and
ready cycle, port slots, stalls) and identical architectural state afterwards (every memory
byte, registers, accumulators). Larger programs (whole models) are compared by their own tests
(``test_twin.py``).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from hwsim.targets.base import Machine
from tests import profiles

TWIN_OPS = 4000
PAGE = 4096


def pytest_addoption(parser):
    parser.addoption("--all", action="store_true", dest="run_all",
                     help="run the slow tests too, with the thorough hypothesis profile")


def pytest_configure(config):
    profiles.use(config.option.run_all)


def pytest_collection_modifyitems(config, items):
    if config.option.run_all or config.option.markexpr:
        return                                  # everything, or what -m asks for
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def state_differences(a, b, path="machine") -> list[str]:
    """Where two machines' architectural states differ."""
    if isinstance(a, np.ndarray):
        return [] if _equal(a, b) else [path]
    if isinstance(a, dict):
        return [d for k in a for d in state_differences(a[k], b[k], f"{path}[{k!r}]")]
    if isinstance(a, (list, tuple)):
        return [d for k, (x, y) in enumerate(zip(a, b))
                for d in state_differences(x, y, f"{path}[{k}]")]
    if hasattr(a, "__dict__"):
        return [d for k, v in vars(a).items() if not k.startswith("_")
                for d in state_differences(v, getattr(b, k), f"{path}.{k}")]
    return [] if a == b else [path]


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Arrays equal, a memory's bytes compared eight at a time (a 256 MiB DDR is most of the
    cost of this fixture)."""
    if a.dtype == b.dtype == np.uint8 and a.shape == b.shape and a.size % 8 == 0 \
            and a.flags.c_contiguous and b.flags.c_contiguous:
        return np.array_equal(a.view(np.uint64), b.view(np.uint64))
    return np.array_equal(a, b)


def _copy(data: np.ndarray) -> np.ndarray:
    """A copy of a memory's bytes that writes only the pages holding a nonzero byte: the rest
    of a fresh ``np.zeros`` costs nothing until written, and most of a large memory never is."""
    out = np.zeros_like(data)
    whole = data.size // PAGE * PAGE
    pages, copies = data[:whole].reshape(-1, PAGE), out[:whole].reshape(-1, PAGE)
    used = np.flatnonzero(pages.view(np.uint64).any(axis=1))
    copies[used] = pages[used]
    out[whole:] = data[whole:]
    return out


def twin_of(machine: Machine, program):
    """A deep copy of a machine and its program (plans may name its memories)."""
    memo = {id(space.data): _copy(space.data) for space in machine.spaces.values()}
    return copy.deepcopy((machine, program), memo)


def state(machine: Machine) -> dict:
    return {name: getattr(machine, name) for name in machine.STATE}


@pytest.fixture(autouse=True)
def both_engines(monkeypatch):
    simulate = Machine._simulate

    def checked(self, program, numerics, engine, progress, watcher):
        if len(program) > TWIN_OPS:
            return simulate(self, program, numerics, engine, progress, watcher)
        twin, twin_program = twin_of(self, program)
        other = "simpy" if engine == "compiled" else "compiled"
        expected = simulate(twin, twin_program, numerics, other, None, None)
        result = simulate(self, program, numerics, engine, progress, watcher)
        assert result.records.differences(expected.records) == [], "the engines disagree"
        assert state_differences(state(self), state(twin)) == [], "the engines disagree"
        return result
    monkeypatch.setattr(Machine, "_simulate", checked)
