"""A cold start's SME kernels for the core child.

SME runs its program before the timing (``Machine.in_order``), so on a cold numba cache the run
compiles its interpreter and kernels while a child process compiles the timing core
(``hwsim.timing.warm``). The run's half is the longer in the float modes: each outer-product
kernel calls an exact per-element function compiled apart (``kernels.exact``: ``fma``, ``dot``,
``sop``, about 2 s each). So the child compiles those first, and the run compiles its
interpreter's loop before its kernels (``interpreter.Runner``): when it gets to the exact
function, seconds later, the child has written it to the disk cache and the run loads it.
"""

from __future__ import annotations

from hwsim.targets.sme import kernels

# The exact functions the programs of each lowering mode call (``interpreter._kernels``) on the
# default machine (without FEAT_EBF16, widening BF16 uses BFDotAdd with EBF=0: ``sop``).
EXACT = {"fp32": ("fma",), "bf16": ("fma",), "bf16-widening": ("sop",), "int8": ()}


def exact_names(mode: str, numerics: bool) -> tuple[str, ...]:
    """The exact functions a run in ``mode`` calls (none when timing only)."""
    return EXACT.get(mode, ()) if numerics else ()


def compile_exact(names) -> None:
    """Compile (or load) the exact functions ``names``, as the run's ``kernels.exact`` does."""
    for name in names:
        kernels.exact(name)
