"""What a machine does: one package per machine, wired to isa, memory and timing.

The registry maps a machine name to its class, imported on first use so that ``hwsim targets``
and the other machines do not pay for a machine's numba kernels.
"""

from __future__ import annotations

import importlib

from hwsim.errors import ConfigError

MACHINES = {
    # name: "module:Class"
    "hmx": "hwsim.targets.hmx.machine:HmxMachine",
    "sme": "hwsim.targets.sme.machine:SmeMachine",
    "gap9": "hwsim.targets.gap9.machine:Gap9",
}


def machine_class(name: str):
    try:
        module, _, cls = MACHINES[name].partition(":")
    except KeyError:
        raise ConfigError(f"unknown target {name!r}; expected one of "
                          f"{', '.join(MACHINES) or '(none)'}") from None
    return getattr(importlib.import_module(module), cls)


def machine(name: str, engine: str | None = None, **params):
    """A new machine with its parameters set (``hwsim targets`` lists them); ``engine``:
    the timing engine its runs use, ``compiled`` (default) or ``simpy`` (the reference)."""
    return machine_class(name)(engine=engine, **params)


def targets() -> list[str]:
    return list(MACHINES)
