"""The architectural state of one HMX (V81 HMX PRM): real storage only.

The pair of accumulators (32 x 32 cells of the 37-bit format, ``numerics.py``) with the index
of the primary one, four bias register sets (32 raw 64-bit words each, Figure 12), the convert
state (32 x 32 cells of FP16 plus the 4 extra mantissa bits, section 2.3.2 and chapter 5) and
USR (a raw word; bits 20 and 21 modelled, Table 7, read through ``isa.hmx.USR``). VTCM and DDR
are the machine's address spaces.
"""

from __future__ import annotations

import functools

import numpy as np

from hwsim.isa.hmx import BIAS_REG, USR

CELLS = 32  # spatials and filters of an accumulator (Figure 9)


class HmxState:
    """The architectural state of one HMX and its USR word."""

    def __init__(self):
        self.acc = np.zeros((2, CELLS, CELLS), dtype=np.uint64)
        self.primary = 0
        self.bias = np.zeros((4, CELLS), dtype=np.uint64)
        self._fields: list = [None] * 4  # the decoded fields of a set, made when first used
        self.cvt = np.zeros((CELLS, CELLS), dtype=np.uint32)  # FP16 << 4 | 4 extra bits
        self.usr = 0

    def set_bias(self, index: int, words: np.ndarray) -> None:
        self.bias[index] = words
        self._fields[index] = None

    def bias_fields(self, index: int) -> dict[str, np.ndarray]:
        if self._fields[index] is None:
            self._fields[index] = BIAS_REG.decode_array(self.bias[index])
        return self._fields[index]

    def usr_field(self, name: str) -> int:
        """A modelled USR bit by its ``isa.hmx.USR`` name (``infnan_propagate``,
        ``nan_propagate``)."""
        return _usr_fields(self.usr)[name]


@functools.lru_cache(maxsize=16)
def _usr_fields(word: int) -> dict[str, int]:
    # a multiply reads USR: decode each value once (a program writes one or two)
    return USR.decode(word, check=False)
