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
        return [] if np.array_equal(a, b) else [path]
    if isinstance(a, dict):
        return [d for k in a for d in state_differences(a[k], b[k], f"{path}[{k!r}]")]
    if isinstance(a, (list, tuple)):
        return [d for k, (x, y) in enumerate(zip(a, b))
                for d in state_differences(x, y, f"{path}[{k}]")]
    if hasattr(a, "__dict__"):
        return [d for k, v in vars(a).items() if not k.startswith("_")
                for d in state_differences(v, getattr(b, k), f"{path}.{k}")]
    return [] if a == b else [path]


def state(machine: Machine) -> dict:
    return {name: getattr(machine, name) for name in machine.STATE}


@pytest.fixture(autouse=True)
def both_engines(monkeypatch):
    simulate = Machine._simulate

    def checked(self, program, numerics, engine, progress, watcher):
        if len(program) > TWIN_OPS:
            return simulate(self, program, numerics, engine, progress, watcher)
        twin, twin_program = copy.deepcopy((self, program))   # plans may name its memories
        other = "simpy" if engine == "compiled" else "compiled"
        expected = simulate(twin, twin_program, numerics, other, None, None)
        result = simulate(self, program, numerics, engine, progress, watcher)
        assert result.records.differences(expected.records) == [], "the engines disagree"
        assert state_differences(state(self), state(twin)) == [], "the engines disagree"
        return result
    monkeypatch.setattr(Machine, "_simulate", checked)
