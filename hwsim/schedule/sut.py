"""The scheduler's machines as targets of the conformance system under test
(``hwsim.tosa.sut``): ``--sut-module-args hwsim.tosa.sut:target=gap9`` runs each operator test
through the GAP9 lowering in exact mode (tests of operators it does not lower are skipped;
a lowering that rejects a test's types or shapes reports why)."""

from __future__ import annotations

from hwsim.schedule import LOWERINGS, estimate, lowering
from hwsim.tosa.sut import register_target


def _runner(target: str):
    modes = lowering(target).modes
    mode = "exact" if "exact" in modes else modes[0]   # HMX: fp16, its only float mode

    def run(graph, inputs):
        report = estimate(graph, target, mode=mode, inputs=list(inputs))
        return report.outputs
    return run


for _name in LOWERINGS:
    register_target(_name, _runner(_name), lowering(_name).operators)
