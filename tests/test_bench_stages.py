"""benchmarks/bench_stages.py's timers: they time what they wrap and change nothing else."""

import importlib.util
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stages():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("bench_stages",
                                                      ROOT / "benchmarks" / "bench_stages.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


@pytest.fixture
def target(monkeypatch):
    """A module with a function and a class of every kind of method, as ``stages_target``."""
    module = types.ModuleType("stages_target")

    def twice(x):
        return 2 * x

    class Thing:
        def __init__(self):
            self.base = 1

        def plain(self, x):
            return self.base + x

        @staticmethod
        def static(x):
            return 3 * x

        @classmethod
        def made(cls, x):
            return cls.__name__, x

        @property
        def size(self):
            return self.base + 1

    module.twice, module.Thing, module.LIMIT = twice, Thing, 3
    monkeypatch.setitem(sys.modules, "stages_target", module)
    return module


def test_each_kind_of_function_is_timed_and_still_works(stages, target):
    totals = stages.defaultdict(float)
    specs = ["stages_target:twice", "stages_target:Thing.plain", "stages_target:Thing.static",
             "stages_target:Thing.made", "stages_target:Thing.size"]
    for spec in specs:
        stages.timer(spec, totals)
    thing = target.Thing()
    assert (target.twice(4), thing.plain(4), thing.static(4), target.Thing.static(5),
            target.Thing.made(6), thing.size) == (8, 5, 12, 15, ("Thing", 6), 2)
    assert set(totals) == set(specs) and all(seconds > 0 for seconds in totals.values())


@pytest.mark.parametrize("spec,message", [
    ("stages_target", "expected module:name"),
    ("stages_nowhere:f", "No module named 'stages_nowhere'"),
    ("stages_target:Thing.missing", "has no attribute 'missing'"),
    ("stages_target:LIMIT", "not a function, a method or a property"),
])
def test_a_function_not_found_is_a_clear_error(stages, target, spec, message):
    with pytest.raises(ValueError, match=f"^{spec}: .*{message}"):
        stages.timer(spec, {})
