"""The architectural state of GAP9: its memories and the NE16's register contexts, real storage.

* Memories: L1 (the cluster's TCDM), L2, MRAM (read-only to a program: its contents are loaded
  before the run) and the external L3, each a byte array at its base address (``params``).
* The NE16's two register contexts (``isa.ne16``: ``NUM_REGISTERS`` words each), the context
  the next register writes go to, and which contexts hold a committed job not yet ended (what
  the status register reports).

The cluster cores' registers and the DMA's are not state: a kernel or a transfer is one
instruction, so nothing of them outlives it.
"""

from __future__ import annotations

from hwsim.isa import ne16 as isa
from hwsim.memory.space import AddressSpace


def memories(p) -> dict[str, AddressSpace]:
    """The machine's address spaces by name, sized and placed by the parameters ``p``."""
    return {"l1": AddressSpace("l1", p.l1_size, p.l1_base),
            "l2": AddressSpace("l2", p.l2_size, p.l2_base),
            "mram": AddressSpace("mram", p.mram_size, p.mram_base, readonly=True),
            "l3": AddressSpace("l3", p.l3_size, p.l3_base)}


class Gap9State:
    """The NE16's register contexts and job queue."""

    def __init__(self):
        self.contexts = [[0] * isa.NUM_REGISTERS for _ in range(isa.CONTEXTS)]
        self.configuring = 0                    # context the next register writes go to
        self.holding = [False] * isa.CONTEXTS   # committed and not yet ended, per context
