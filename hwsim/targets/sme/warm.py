"""A cold start's SME kernels for the core child.

SME runs its program before the timing (``Machine.in_order``), so on a cold numba cache the run
compiles its interpreter and kernels while a child process compiles the timing core
(``hwsim.timing.warm``). The run's half is the longer in the float modes: each outer-product
kernel calls an exact per-element function compiled apart (``kernels.exact``: ``fma``, ``dot``,
``sop``, about 2 s each). So the child compiles those first, and the run compiles its
interpreter's loop before its kernels (``interpreter.Runner``): when it gets to the exact
function, seconds later, the child has written it to the disk cache and the run loads it. The
child then compiles the first routine's kernel (``vec pack``: ``layouts.conv_panels``, about 1 s)
for the element type the mode packs.
"""

from __future__ import annotations

import numpy as np

from hwsim.targets.sme import kernels, layouts

# The exact functions the programs of each lowering mode call (``interpreter._kernels``) on the
# default machine (without FEAT_EBF16, widening BF16 uses BFDotAdd with EBF=0: ``sop``).
EXACT = {"fp32": ("fma",), "bf16": ("fma",), "bf16-widening": ("sop",), "int8": ()}


# The element type ``vec pack`` packs in each mode (``vector._run_pack``: int8 as int16)
PACKED = {"fp32": np.float32, "bf16": np.float32, "bf16-widening": np.float32, "int8": np.int16}


def child_args(mode: str, numerics: bool) -> tuple[str, ...]:
    """The core child's arguments for a run in ``mode``: the mode, if the run computes values
    (a timing-only run calls none of these kernels)."""
    return (mode,) if numerics and mode in PACKED else ()


def compile_numerics(mode: str) -> None:
    """Compile (or load) the exact functions a run in ``mode`` calls, as the run's
    ``kernels.exact`` does, then the pack kernel for the mode's element type."""
    for name in EXACT[mode]:
        kernels.exact(name)
    layouts.conv_panels(np.zeros((1, 1, 1, 1), PACKED[mode]), (1, 1), (1, 1), (0, 0, 0, 0),
                        (1, 1), 0, 1, 1, 1)
