"""The scheduler's machines as targets of the conformance system under test
(``hwsim.tosa.sut``): ``--sut-module-args hwsim.tosa.sut:target=gap9`` runs each operator test
through that machine's lowering in its default mode for the graph (GAP9: exact; HMX: fp16;
SME: int8 or fp32 by the graph's types). Tests of operators it does not lower are skipped; a
lowering that rejects a test's types or shapes reports why."""

from __future__ import annotations

from hwsim.schedule import LOWERINGS, estimate, lowering
from hwsim.tosa.sut import register_target


def _runner(target: str):
    def run(graph, inputs):
        report = estimate(graph, target, inputs=list(inputs))
        return report.outputs
    return run


for _name in LOWERINGS:
    register_target(_name, _runner(_name), lowering(_name).operators)
