"""A job as the compiled NE16 datapath reads it: its modes and geometry as arrays.

``words(job)`` decodes a job's registers (``Ne16Job``) once per job signature (the registers
but the pointers: the tiles of a layer share one) into int64 words indexed by the constants
below, and lays out its outputs as the streamer writes them (``datapath.output_layout``):
which channels and positions are written and where. The compiled kernels (``kernel``)
take these with the pointers beside them.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from hwsim.targets.gap9.ne16.datapath import output_layout
from hwsim.targets.gap9.ne16.job import Ne16Job

(FILTER, MODE16, NB_KO, NB_KI, NB_HO, NB_WO, REM_KI, REM_HI, REM_WI, IN_D0, IN_D1, PAD_T, PAD_B,
 PAD_L, PAD_R, PAD_VALUE, STREAMIN, QUANT, NORM_BITS, NORM_BIAS, NORM_SHIFT, SHIFT, NO_ROUND,
 RELU, OUT_BITS, COUNT) = range(26)
CONV, DEPTHWISE, POINTWISE, LINEAR = range(4)        # FILTER
_WORDS: dict = {}
_LIMIT = 2048


class Words(NamedTuple):
    g: np.ndarray           # int64 words, indexed by the constants above
    valid: np.ndarray       # bool [K]: output channels within their subtile's remainder
    lanes: np.ndarray       # int64 [K]: byte offset of each channel's value in its pixel
    stored: np.ndarray      # bool [positions]: output positions the streamer writes
    pos: np.ndarray         # int64 [positions]: offset of each position's pixel from OUTFEAT_PTR


def words(job: Ne16Job) -> Words:
    """The job's words and output layout, cached per job signature."""
    found = _WORDS.get(job.signature)
    if found is None:
        if len(_WORDS) >= _LIMIT:
            _WORDS.clear()
        nbytes = job.out_bits // 8 if job.quant else 4
        pos, stored, lanes, valid = output_layout(job, nbytes)
        found = _WORDS[job.signature] = Words(_words(job), valid, lanes, stored, pos)
    return found


def _words(job: Ne16Job) -> np.ndarray:
    c, p = job.config, job.pad
    mode = LINEAR if job.linear else (DEPTHWISE if job.depthwise else
                                      (POINTWISE if job.pointwise else CONV))
    values = [mode, job.mode16, job.nb_ko, job.nb_ki, job.nb_ho, job.nb_wo, job.rem_ki,
              job.rem_hi, job.rem_wi, job.reg("INFEAT_D0_STRIDE"), job.reg("INFEAT_D1_STRIDE"),
              p["top"], p["bottom"], p["left"], p["right"], p["value"], job.streamin, job.quant,
              job.norm_bits, c["norm_bias"], c["norm_shift"], c["shift"], c["no_round"],
              job.relu, job.out_bits]
    assert len(values) == COUNT
    return np.array(values, np.int64)


@numba.njit(cache=True, inline="always")
def last(index, count, rem, full):
    """Size of subtile ``index`` of ``count``: the remainder for the last one, if any."""
    return rem if index == count - 1 and rem != 0 else full
