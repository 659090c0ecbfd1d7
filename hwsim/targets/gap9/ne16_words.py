"""A job as the compiled NE16 datapath reads it: its modes and geometry as int64 words.

``words(job)`` decodes a job's registers (``Ne16Job``) into one small array, indexed by the
constants below, once per job signature (the registers but the pointers: the tiles of a layer
share one); the compiled kernels (``ne16_kernel``) take it with the pointers beside it.
"""

from __future__ import annotations

import numba
import numpy as np

from hwsim.targets.gap9.ne16_job import Ne16Job

(NB_KO, NB_KI, NB_HO, NB_WO, REM_KO, REM_KI, REM_HO, REM_WO, REM_HI, REM_WI, FILTER, MODE16,
 STRIDED, STREAMIN, QUANT, RELU, NORM_BIAS, NORM_SHIFT, SHIFT, NO_ROUND, OUT_BITS, NORM_BITS,
 QW, W_OFFSET, PAD_T, PAD_B, PAD_L, PAD_R, PAD_VALUE, MASK_T, MASK_R, MASK_B, MASK_L, IN_D0,
 IN_D1, OUT_D0, OUT_D1, OUT_D2, W_D0, W_D1, W_D2, COUNT) = range(42)
CONV, DEPTHWISE, POINTWISE, LINEAR = range(4)        # FILTER
_STRIDES = ("INFEAT_D0_STRIDE", "INFEAT_D1_STRIDE", "OUTFEAT_D0_STRIDE", "OUTFEAT_D1_STRIDE",
            "OUTFEAT_D2_STRIDE", "WEIGHTS_D0_STRIDE", "WEIGHTS_D1_STRIDE", "WEIGHTS_D2_STRIDE")
_WORDS: dict = {}
_LIMIT = 2048


def words(job: Ne16Job) -> tuple[np.ndarray, tuple]:
    """The job's words and the shape of its output values ([positions, K]: every output
    position of its patches, or one in linear mode; every channel of its k_out subtiles)."""
    found = _WORDS.get(job.signature)
    if found is None:
        if len(_WORDS) >= _LIMIT:
            _WORDS.clear()
        positions = 1 if job.linear else job.nb_ho * job.nb_wo * 9
        found = _WORDS[job.signature] = (_words(job), (positions, job.nb_ko * job.tp_out))
    return found


def _words(job: Ne16Job) -> np.ndarray:
    c, p, m = job.config, job.pad, job.mask
    mode = LINEAR if job.linear else (DEPTHWISE if job.depthwise else
                                      (POINTWISE if job.pointwise else CONV))
    values = [job.nb_ko, job.nb_ki, job.nb_ho, job.nb_wo, job.rem_ko, job.rem_ki, job.rem_ho,
              job.rem_wo, job.rem_hi, job.rem_wi, mode, job.mode16, job.strided, job.streamin,
              job.quant, job.relu, c["norm_bias"], c["norm_shift"], c["shift"], c["no_round"],
              job.out_bits, job.norm_bits, job.weight_bits, job.weight_offset, p["top"],
              p["bottom"], p["left"], p["right"], p["value"], m["top"], m["right"],
              m["bottom"], m["left"]] + [job.reg(name) for name in _STRIDES]
    assert len(values) == COUNT
    return np.array(values, np.int64)


@numba.njit(cache=True, inline="always")
def last(index, count, rem, full):
    """Size of subtile ``index`` of ``count``: the remainder for the last one, if any."""
    return rem if index == count - 1 and rem != 0 else full
