"""System under test for the tosa-tools conformance runner, and the registry of graph targets.

Run generated operator tests through hwsim with::

    tosa_verif_build_tests -o TESTS --filter '^conv2d$' --tosa-version 1.0 ...
    PYTHONPATH=/path/to/hwsim tosa_verif_run_tests -t TESTS -r \\
        --sut-module hwsim.tosa.sut --sut-module-args hwsim.tosa.sut:target=reference

The runner loads this module and uses ``TosaSUTRunner`` for each test: the test's graph is
loaded into the IR (an ERROR_IF found there is the expected failure of a negative test), run on
the chosen target, and the outputs are written where the runner's verifier (``tosa_verify``)
compares them with the reference model's compliance results.

A target is one function, ``run(graph, inputs) -> {output name: array}``, registered under a
name with ``register_target``. ``"reference"`` is built in: it runs the reference model binary
in a subprocess, like tosa-tools' own SUT (the runner's worker threads share file descriptors,
so the in-process wrapper's output capture is not thread-safe). So is each machine of the
scheduler (``hwsim.schedule.LOWERINGS``), registered when first asked for: ``target=gap9`` runs
each operator test through that machine's lowering in its default mode for the graph (GAP9:
exact; HMX: fp16; SME: int8 or fp32 by the graph's types); a lowering that rejects a test's
types or shapes reports why. Tests of operators a target does not list are skipped, not failed.

This module is an entry point (the runner loads it by name) and sits above the scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from hwsim.errors import ConfigError, HwsimError, ScheduleError, TosaError
from hwsim.tosa.dtypes import from_bits
from hwsim.tosa.ir import Graph
from hwsim.tosa.loaders import load_graph
from hwsim.tosa.reference import ReferenceError, graph_inputs, save_npy
from hwsim.tosa.reference import run_graph as run_reference


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[Graph, list[np.ndarray]], dict[str, np.ndarray]]
    operators: frozenset[str] | None = None      # None: every operator


TARGETS: dict[str, Target] = {}


def register_target(name: str, run, operators=None) -> None:
    """Make ``run(graph, inputs)`` available as target ``name`` (``operators``: the TOSA
    operators it supports; tests of others are skipped)."""
    TARGETS[name] = Target(name, run, frozenset(operators) if operators else None)


def _reference(graph: Graph, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    # the runner's worker threads share file descriptors: run the binary, not in-process
    return run_reference(graph, inputs, isolated=True)


register_target("reference", _reference)


def _machine(name: str):
    """The scheduler's machine ``name`` as a target: its outputs for the graph's inputs."""
    from hwsim.schedule import estimate

    def run(graph: Graph, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
        return estimate(graph, name, inputs=list(inputs)).outputs
    return run


def target(name: str) -> Target:
    from hwsim.schedule import LOWERINGS, lowering
    if name not in TARGETS and name in LOWERINGS:
        register_target(name, _machine(name), lowering(name).operators)
    if name not in TARGETS:
        raise ConfigError(f"unknown target {name!r}; expected one of "
                          f"{', '.join(sorted(set(TARGETS) | set(LOWERINGS)))}")
    return TARGETS[name]


def run_graph(graph: Graph, inputs, target_name: str = "reference") -> dict[str, np.ndarray]:
    """Run ``graph`` on a target; outputs by name, checked against the graph's outputs."""
    chosen = target(target_name)
    outputs = chosen.run(graph, graph_inputs(graph, inputs))
    for t in graph.outputs:
        if t.name not in outputs or np.shape(outputs[t.name]) != t.shape:
            raise HwsimError(f"target {target_name} did not return output {t.name} "
                             f"{list(t.shape)}")
    return outputs


def _load_runner_base():
    from runner.tosa_test_runner import TosaTestRunner      # tosa-tools' runner package
    return TosaTestRunner


class TosaSUTRunner(_load_runner_base()):
    """One conformance test on an hwsim target (runner argument ``target=NAME``)."""

    def __init__(self, args, runner_args, test_dir):
        super().__init__(args, runner_args, test_dir)
        options = dict(a.split("=", 1) for a in runner_args if "=" in a)
        self.target_name = options.get("target", "reference")

    def skipTest(self):
        skip, reason = super().skipTest()
        operators = target(self.target_name).operators
        operator = self.testDesc.get("test_details", {}).get("operator")
        if not skip and operators is not None and operator not in operators:
            return True, f"{operator} not supported by target {self.target_name}"
        return skip, reason

    def runTestGraph(self):
        result = self.TosaGraphResult
        desc, folder = self.testDesc, self.testDirPath
        try:
            graph = load_graph(folder / desc["tosa_file"])
            by_name = {t.name: t for t in graph.inputs}
            inputs = {name: from_bits(by_name[name].dtype, np.load(folder / file))
                      for name, file in zip(desc["ifm_name"], desc["ifm_file"])
                      if name in by_name}
            outputs = run_graph(graph, inputs, self.target_name)
        except ReferenceError as exc:
            code = result.TOSA_UNPREDICTABLE if exc.status == "UNPREDICTABLE" else \
                result.TOSA_ERROR
            return code, str(exc)
        except TosaError as exc:
            return result.TOSA_ERROR, str(exc)
        except (ScheduleError, HwsimError) as exc:
            return result.OTHER_ERROR, str(exc)
        by_name = {t.name: t for t in graph.outputs}
        for name, file in zip(desc["ofm_name"], desc["ofm_file"]):
            save_npy(folder / file, by_name[name].dtype, outputs[name])
        return result.TOSA_VALID, None

