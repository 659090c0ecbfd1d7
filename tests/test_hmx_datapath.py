"""The HMX multiply datapath: its VTCM gathers against their numpy twins, for every activation
form, and its results against the numerics twin."""

import numpy as np
import pytest

import hwsim
from hwsim.errors import Location
from hwsim.isa.hmx import USR
from hwsim.targets.hmx import datapath as D
from hwsim.targets.hmx import numerics as N

rng = np.random.default_rng(5)
MASK = 0x700  # spatial mask 11100 in Rt

MULTIPLIES = {
    "plain 8..23": ["Q6_activation_hf_mxmem_RR(0x800 | 8 << 2, 0x700 | 23 << 2)",
                    "Q6_weight_hf_mxmem_RR(0x10000, 0x7ff)"],
    "deep, 4 croutons 8..15": ["Q6_activation_hf_mxmem_RR_deep(0x1000 | 8 << 2, 3 << 11 | "
                               "0x700 | 15 << 2)", "Q6_weight_hf_mxmem_RR(0x10000, 0x1fff)"],
    "single, Y offset 3": ["Q6_activation_hf_mxmem_RR_single(0x2000 | 0b11 << 8, 0x2000 | "
                           "0x700 | 31 << 2)", "Q6_weight_hf_mxmem_RR(0x10000 | 1 << 5, 0x7ff)"],
    "weight deep": ["Q6_activation_hf_mxmem_RR_deep(0x0, 1 << 11 | 0x700 | 31 << 2)",
                    "Q6_weight_hf_mxmem_RR_deep(0x10000, 0x3fff)"],
    "too few weights": ["Q6_activation_hf_mxmem_RR(0x0, 0x700 | 31 << 2)",
                        "Q6_weight_hf_mxmem_RR(0x10000, 5 * 128 - 1)"],
}


def planned(lines):
    m = hwsim.machine("hmx")
    vtcm = m.memory("vtcm")
    vtcm.write(0, rng.standard_normal(0x20000 // 2).astype(np.float16))
    (step,) = m.parse([(line, Location("t", i + 1, 1)) for i, line in enumerate(lines)])
    return m, vtcm, step.plan


@pytest.mark.parametrize("name", MULTIPLIES)
def test_gathers_match_their_twins(name):
    m, vtcm, plan = planned(MULTIPLIES[name])
    mem = vtcm.data.view(np.uint16)
    first, step, count, start, stop, rows, wgt_start = plan.operands
    act = np.full((D.MAX_CHANNELS, 32), 0xFFFF, dtype=np.uint16)
    k = D.gather_act(mem, first, step, count, start, stop, rows, act)
    assert k == plan.channels
    assert (act[:k] == D.act_matrix(vtcm, plan)).all()
    wgt = np.full((2 * D.MAX_CHANNELS, 32), 0xFFFF, dtype=np.uint16)
    D.gather_wgt(mem, wgt_start, plan.given, plan.needed, wgt)
    assert (wgt[:2 * plan.needed] == np.concatenate(D.wgt_matrices(vtcm, plan))).all()


@pytest.mark.parametrize("name", MULTIPLIES)
def test_multiply_matches_the_numerics_twin_and_leaves_the_state(name):
    m, vtcm, plan = planned(MULTIPLIES[name])
    m.state.acc[:] = 0
    primary = 1
    targets = [primary, 1 - primary][:2 if plan.deep_weights else 1]
    before = m.state.acc.copy()
    D.multiply(vtcm, m.state, plan, targets, m.acc_format, m.acc_round_group, m.buffers)
    assert (m.state.acc == before).all()
    for index, wgt in zip(targets, D.wgt_matrices(vtcm, plan)):
        want = before[index].copy()
        N.multiply_twin(D.act_matrix(vtcm, plan), wgt, want, plan.negate, 0, *m.acc_format,
                        m.acc_round_group)
        assert (m.buffers.acc[index] == want).all()


def test_write_convert_matches_its_twin():
    state = hwsim.machine("hmx").state
    state.cvt[:] = rng.integers(0, 1 << 20, (32, 32))
    want = D.layouts.pack_crouton((state.cvt >> 4).astype(np.uint16))
    assert (D.write_convert(state) == want).all()


def test_weights_decoded_once_are_decoded_again_when_they_change():
    m, vtcm, plan = planned(MULTIPLIES["weight deep"])
    wgt_bytes = plan.given * 128

    def check():
        m.state.acc[:] = 0
        D.multiply(vtcm, m.state, plan, [0, 1], m.acc_format, m.acc_round_group, m.buffers)
        for index, wgt in zip([0, 1], D.wgt_matrices(vtcm, plan)):
            want = np.zeros((32, 32), dtype=np.uint64)
            N.multiply_twin(D.act_matrix(vtcm, plan), wgt, want, plan.negate,
                            m.state.usr_field("infnan_propagate"), *m.acc_format, m.acc_round_group)
            assert (m.buffers.acc[index] == want).all()
    check()
    check()  # the same weights again
    vtcm.write(0x10000 + 64, np.float16([1e4, -3.0]))  # one weight of each group changes
    vtcm.write(0x10000 + wgt_bytes // 2 + 64, np.float16([7.0]))
    check()
    vtcm.write(0x10000, np.uint16([0x7C00]))  # with USR[20] = 0: 2^16, a finite value
    check()
    m.state.usr = USR.encode(infnan_propagate=1)  # the same bits, now +Inf
    check()
