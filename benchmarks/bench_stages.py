"""Where the time of a warm estimate goes: the wall time of named functions inside it.

    PYTHONPATH=. python benchmarks/bench_stages.py TARGET MODEL FUNCTION [FUNCTION ...]
        [--mode M] [--repeat 5] [--no-check]

MODEL is a model of ``bench_models.py`` (``kws_ref_model``, ``synthetic ds_cnn fp32``, ...);
FUNCTION is ``module:name`` or ``module:Class.method`` (or ``.property``), e.g.
``hwsim.targets.sme.machine:SmeMachine.compile``. Each function is wrapped in a timer for
``--repeat`` warm ``hwsim.estimate`` calls on fresh copies of the model, after one untimed
call, with the check unless ``--no-check``; its figure is its mean time per estimate, beside
the estimate's own phases (``Report.wall``). A call inside another timed one counts in both, a
timed call costs about a microsecond more, and a function another module imported by name
(``from m import f``) is timed only where it is called through its own module. This is how
the stage figures of the closing notes are measured: run it at two commits, alternately.

Results are printed and saved in benchmarks/results/stages.json (a run replaces the rows of
the functions it timed on that target, model and mode).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from hwsim.schedule import LOWERINGS, estimate, lowering  # noqa: E402
from hwsim.tosa import background  # noqa: E402
from hwsim.tosa.models import sample_input  # noqa: E402
from bench_models import _copy, cases  # noqa: E402
from common import MODELS, save_rows  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "stages.json"


def timer(spec: str, totals: dict) -> None:
    """Wrap the function ``spec`` names so that each call adds its wall time to
    ``totals[spec]``; a ``ValueError`` names what is not found."""
    module_name, _, qualified = spec.partition(":")
    if not qualified:
        raise ValueError(f"{spec}: expected module:name or module:Class.method")
    *path, name = qualified.split(".")
    try:
        owner = importlib.import_module(module_name)
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{spec}: {exc}") from None
    static = inspect.getattr_static(owner, name)
    if isinstance(static, property):        # its getter is timed
        original = static.fget
    if not callable(original):
        raise ValueError(f"{spec}: not a function, a method or a property")

    @functools.wraps(original)
    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            totals[spec] += time.perf_counter() - start
    # a static or class method stays one (``original`` is already bound for a class method),
    # a property a property
    if isinstance(static, property):
        timed = property(timed, static.fset, static.fdel, static.__doc__)
    elif isinstance(static, (staticmethod, classmethod)):
        timed = staticmethod(timed)
    setattr(owner, name, timed)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target")
    parser.add_argument("model", help="a model of bench_models.py")
    parser.add_argument("functions", nargs="+", metavar="function")
    parser.add_argument("--mode", help="numeric mode (default: the model's first in "
                                       "bench_models.py)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-check", dest="check", action="store_false")
    args = parser.parse_args(argv)
    if args.target not in LOWERINGS:
        parser.error(f"unknown target {args.target!r}; expected one of {', '.join(LOWERINGS)}")
    low = lowering(args.target)
    runs = [(name, graph, mode or low.default_mode(graph))
            for name, _, graph, mode, _ in cases(args.target)]
    found = [run for run in runs if run[0] == args.model and args.mode in (None, run[2])]
    if not found:
        parser.error(f"no model {args.model!r} in mode {args.mode or 'any'} on {args.target}; "
                     "expected one of " + ", ".join(sorted({f"{n} ({m})" for n, _, m in runs})))
    name, graph, mode = found[0]
    x = np.load(MODELS / "kws_sample_input.npy") if name == "kws_ref_model" else \
        sample_input(graph)
    totals: dict = defaultdict(float)
    for spec in args.functions:
        try:
            timer(spec, totals)
        except ValueError as exc:
            parser.error(str(exc))
    background.start(wait=60)
    estimate(graph, args.target, mode=mode, check=args.check, inputs=x)    # warm
    totals.clear()
    phases: dict = defaultdict(float)
    for _ in range(args.repeat):
        report = estimate(_copy(graph), args.target, mode=mode, check=args.check, inputs=x)
        for phase, seconds in report.wall.items():
            phases[phase] += seconds
    phases_ms = {phase: round(s / args.repeat * 1e3, 2) for phase, s in phases.items()}
    print(f"{args.target} {name} {report.mode}, {args.repeat} estimates, phases (ms): "
          + ", ".join(f"{phase} {ms}" for phase, ms in phases_ms.items()))
    rows = []
    for spec in args.functions:
        ms = totals[spec] / args.repeat * 1e3
        print(f"  {spec}: {ms:.2f} ms per estimate")
        rows.append({"target": args.target, "model": name, "mode": report.mode,
                     "function": spec, "ms_per_estimate": ms, "check": args.check,
                     "repeat": args.repeat, "phases_ms": phases_ms})
    save_rows(RESULTS, rows, ("target", "model", "mode", "function"),
              "PYTHONPATH=. python benchmarks/bench_stages.py TARGET MODEL FUNCTION ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
