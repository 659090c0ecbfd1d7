"""A cold start's SME kernels for the core child.

SME runs its program before the timing (``Machine.in_order``), so on a cold numba cache the run
compiles its interpreter and kernels while a child process compiles the timing core
(``hwsim.timing.warm``). The run's half is the longer in the float modes: each outer-product
kernel calls an exact per-element function compiled apart (``kernels.exact``: ``fma``, ``dot``,
``sop``, about 2 s each). So the child compiles those first, and the run compiles its
interpreter's loop before its kernels (``interpreter.Runner``): when it gets to the exact
function, seconds later, the child has written it to the disk cache and the run loads it.

In int8 mode, which calls no exact function, the run's half is the longer: the child compiles
its first routine's kernel instead (``vec pack`` of int8 values as int16:
``layouts.conv_panels``, about 1 s). In the float modes the run compiles that kernel itself,
in time it would spend waiting for the child.
"""

from __future__ import annotations

import numpy as np

from hwsim.targets.sme import kernels, layouts

# What the child compiles first for a run in each mode: the exact functions its programs call
# (``interpreter._kernels``) on the default machine (without FEAT_EBF16, widening BF16 uses
# BFDotAdd with EBF=0: ``sop``), or the pack kernel (module docstring)
FIRST = {"fp32": ("fma",), "bf16": ("fma",), "bf16-widening": ("sop",), "int8": ("pack",)}


def child_args(mode: str, numerics: bool) -> tuple[str, ...]:
    """The core child's arguments for a run in ``mode``: the mode, if the run computes values
    (a timing-only run calls none of these kernels)."""
    return (mode,) if numerics and mode in FIRST else ()


def compile_first(mode: str) -> None:
    """Compile (or load) ``FIRST[mode]``, with the argument types the run passes."""
    for name in FIRST[mode]:
        if name == "pack":
            layouts.conv_panels(np.zeros((1, 1, 1, 1), np.int16), (1, 1), (1, 1), (0, 0, 0, 0),
                                (1, 1), 0, 1, 1, 1)
        else:
            kernels.exact(name)
