"""An SME program as arrays: one A64 word per instruction, and the vector routines between them.

Programs reach the machine from two places: trace text (parsed line by line) and the scheduler's
lowering (a million instructions for a large GEMM). Either way the machine runs an ``SmeProgram``:

* ``words``: uint32, the A64 encoding of each instruction, in program order;
* ``routines``: position -> the ``vec`` routine (``hwsim.isa.sme_vector.VecOp``, or one already
  bound to memory) that runs at that position; its word is ``ROUTINE`` (UDF #0, permanently
  undefined in A64, so it can never be mistaken for an instruction);
* ``locs``: where each instruction was written (traces only; error messages name it).

Nothing here is per-instruction Python: a lowering appends whole arrays of words (``Builder``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hwsim.errors import Location

ROUTINE = 0x00000000   # UDF #0: where a vector routine sits in ``words``


@dataclass
class SmeProgram:
    words: np.ndarray
    routines: dict = field(default_factory=dict)
    locs: list | None = None
    derived: dict = field(default_factory=dict, repr=False, compare=False)   # computed once

    def __len__(self) -> int:
        return len(self.words)

    def loc(self, index: int) -> Location | None:
        return self.locs[index] if self.locs is not None else None

    @classmethod
    def from_items(cls, items, locs: list | None = None) -> "SmeProgram":
        """From a list of decoded instructions (anything with ``.word``), 32-bit words and
        routines."""
        words = np.zeros(len(items), np.uint32)
        routines = {}
        for i, item in enumerate(items):
            if isinstance(item, (int, np.integer)):
                words[i] = item
            elif hasattr(item, "word"):
                words[i] = item.word
            else:
                routines[i] = item
        return cls(words, routines, locs)


class Builder:
    """Appends chunks of words and single routines; ``program()`` joins them once."""

    def __init__(self):
        self.chunks: list[np.ndarray] = []
        self.routines: dict = {}
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def words(self, words) -> None:
        chunk = np.asarray(words, np.uint32).reshape(-1)
        self.chunks.append(chunk)
        self.size += chunk.size

    def routine(self, routine) -> None:
        self.routines[self.size] = routine
        self.words([ROUTINE])

    def program(self) -> SmeProgram:
        words = np.concatenate(self.chunks) if self.chunks else np.zeros(0, np.uint32)
        return SmeProgram(words, dict(self.routines))
