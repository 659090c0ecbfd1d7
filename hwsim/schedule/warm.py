"""A cold start's child for machines that time a program before replaying its effects
(``hwsim.timing.warm`` says why): it compiles the machine's kernels by running a small model of
the same kind on that machine and mode with the simpy engine, which compiles no timing core.
The model is the synthetic DS-CNN: convolutions, depthwise convolutions, pooling, a fully
connected layer and a softmax. It stops after the run: the attribution's kernels are the
parent's to compile while it waits (``run.compile_attribution``), and on HMX so are the kernels
the DS-CNN calls last (``hwsim.targets.hmx.warm``).

    python -m hwsim.schedule.warm TARGET MODE int8|fp32

For a machine that runs its program before the timing (SME), the child compiles the timing core
instead, after the exact functions (or in int8 mode the pack kernel) a run in MODE calls
(``hwsim.targets.sme.warm``; none without MODE, for a timing-only run), and then the
attribution's kernels and, in a float mode, the check's compiled passes, which such a run
needs last:

    python -m hwsim.schedule.warm core [MODE]
"""

import sys

from hwsim.schedule import _feeds, prepare
from hwsim.schedule.check import compile_passes
from hwsim.schedule.run import compile_attribution, simulate
from hwsim.schedule.sme import FLOAT_MODES
from hwsim.targets.sme.warm import compile_first
from hwsim.timing.warm import compile_core
from hwsim.tosa.models import model

if __name__ == "__main__" and sys.argv[1:2] == ["core"]:
    mode = sys.argv[2] if sys.argv[2:] else None
    if mode:
        compile_first(mode)
    compile_core()
    compile_attribution()
    if mode in FLOAT_MODES:         # whose check judges float layers
        compile_passes()
elif __name__ == "__main__":
    target, mode, dtype = sys.argv[1:4]
    ready = prepare(model("ds_cnn", dtype=dtype), target, mode)
    simulate(ready.lowered, ready.machine, _feeds(ready.lowered.rewritten, None),
             ready.run_params, engine="simpy")
