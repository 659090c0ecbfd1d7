"""The HMX machine: semantics of each instruction, program errors, timing, parameters."""

import numpy as np
import pytest

import hwsim
from hwsim.errors import ConfigError, ProgramError
from hwsim.targets.hmx import layouts as L
from hwsim.targets.hmx.params import PARAMS
from tests import hmx_oracle as O

rng = np.random.default_rng(11)
MASK = 0x700  # spatial mask 11100 in Rt
ACT = f"Q6_activation_hf_mxmem_RR(0x0, {MASK} | 31 << 2)"
CONVERT_WRITE = ["Q6_bias_mxmem2_A(0x3000)", "Q6_cvt_hf_acc_R(0)",
                 f"Q6_mxmem_cvt_RR(0x4000, {MASK})"]


def small(*shape):
    """FP16 multiples of 1/8 in [-2, 2]: every sum below is exact."""
    return (rng.integers(-16, 17, shape) / 8).astype(np.float16)


def machine_with(act=None, wgt=None, scale=1.0, **params):
    m = hwsim.machine("hmx", **params)
    vtcm = m.memory("vtcm")
    act = small(32, 32) if act is None else act  # [s, c]
    wgt = small(32, 32) if wgt is None else wgt  # [o, i]
    vtcm.write(0x0, L.pack_crouton(act))
    vtcm.write(0x800, L.pack_weights(wgt))
    vtcm.write(0x3000, L.pack_bias(np.full(32, scale)))
    return m, act.astype(np.float64), wgt.astype(np.float64)


def output(m, addr=0x4000):
    return L.unpack_crouton(m.memory("vtcm").read(addr, 2048)).view(np.float16).astype(np.float64)


def run(m, *lines):
    return m.run("\n".join(lines) + "\n")


def test_multiply_negate_and_convert():
    m, a, w = machine_with()
    run(m, ACT, "Q6_weight_hf_mxmem_RR(0x800 | 1 << 5, 0x7ff)", *CONVERT_WRITE)
    assert (output(m) == (-(a @ w.T)).astype(np.float16)).all()


def test_too_few_weights_read_as_zeros_and_too_many_cost_flush_cycles():
    m, a, w = machine_with()
    half = run(m, ACT, "Q6_weight_hf_mxmem_RR(0x800, 8 * 128 - 1)", *CONVERT_WRITE)
    # 8 vectors = input channels 0-15; channels 16-31 get zero weights
    assert (output(m) == (a[:, :16] @ w[:, :16].T).astype(np.float16)).all()
    exact = run(m, ACT, "Q6_weight_hf_mxmem_RR(0x800, 16 * 128 - 1)", *CONVERT_WRITE)
    extra = run(m, ACT, "Q6_weight_hf_mxmem_RR(0x800, 20 * 128 - 1)", *CONVERT_WRITE)
    assert (output(m) == (a @ w.T).astype(np.float16)).all()
    busy = lambda r: r.stats["units"]["mpy"]["busy"]  # noqa: E731
    assert busy(extra) - busy(exact) == 4  # mpy_flush_cycles_per_vector = 1
    assert busy(half) == busy(exact) == 8 + 16  # the activation sets the work, not dW


def test_retain_then_clear_and_swap_and_clear_accumulators():
    m, a, w = machine_with()
    mul = [ACT, "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)"]
    run(m, *mul, "Q6_bias_mxmem2_A(0x3000)", "Q6_cvt_hf_acc_R(1)")  # retain
    assert m.state.primary == 0 and m.state.acc[0].any()
    run(m, *mul, "Q6_cvt_hf_acc_R(0)", f"Q6_mxmem_cvt_RR(0x4000, {MASK})")
    assert (output(m) == (2 * (a @ w.T)).astype(np.float16)).all()  # state persists across runs
    assert m.state.primary == 1 and not m.state.acc[0].any()
    run(m, *mul)  # into accumulator 1 now
    assert m.state.acc[1].any() and not m.state.acc[0].any()
    run(m, "Q6_mxclracc_hf()")
    assert not m.state.acc.any() and m.state.primary == 1


def test_bias_store_writes_back_the_loaded_set():
    m = hwsim.machine("hmx")
    data = rng.integers(0, 256, 256, dtype=np.uint8)
    m.memory("vtcm").write(0x1000, data)
    run(m, "Q6_bias_mxmem2_A(0x1000 | 2)", "Q6_mxmem2_bias_A(0x2000 | 2)",
        "Q6_mxmem2_bias_A(0x2100 | 1)")
    assert (m.memory("vtcm").read(0x2000, 256) == data).all()
    assert not m.memory("vtcm").read(0x2100, 256).any()
    assert (m.state.bias[2] == L.unpack_bias_words(data)).all()


def test_bias_select_shape_and_output_bias():
    m, a, w = machine_with()
    m.memory("vtcm").write(0x3100, L.pack_bias(np.full(32, 0.5), output_bias=1.0, shape=2))
    run(m, ACT, "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)", "Q6_bias_mxmem2_A(0x3100 | 3)",
        "Q6_cvt_hf_acc_R(3 << 12)", f"Q6_mxmem_cvt_RR(0x4000, {MASK})")
    assert (output(m) == (0.5 * np.maximum(a @ w.T, 0) + 1).astype(np.float16)).all()


def test_usr_bits_select_table7_behaviour():
    big = np.full((32, 32), 255.0, dtype=np.float16)  # 32 * 255^2 overflows FP16
    m, _, _ = machine_with(act=big, wgt=big)
    mul = [ACT, "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)"]
    bits = lambda: output(m).astype(np.float16).view(np.uint16)  # noqa: E731
    run(m, *mul, *CONVERT_WRITE)
    assert m.state.usr == 0 and (bits() == 0x7FFF).all()  # USR[20] = 0: maxpos 131008
    run(m, "USR = 1 << 20", *mul, *CONVERT_WRITE)
    assert m.state.usr == 1 << 20 and (bits() == 0x7C00).all()  # +Inf
    run(m, *mul, "Q6_bias_mxmem2_A(0x3000)", "Q6_cvt_hf_acc_R(1 << 6)",
        f"Q6_mxmem_cvt_RR(0x4000, {MASK})")
    assert (bits() == 0x7BFF).all()  # ovf = 1: maxnorm 65504


def test_write_spatial_mask_names_the_geometry_and_moves_no_data():
    m, a, w = machine_with()
    run(m, ACT, "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)", *CONVERT_WRITE,
        "Q6_mxmem_cvt_RR(0x4800, 0x0)")
    assert (output(m) == output(m, 0x4800)).all()


def test_deep_single_and_weight_deep_use_the_right_data():
    m = hwsim.machine("hmx")
    x = small(8, 4, 96)  # one spatial tile (mask 11100) of 96 channels: 3 croutons
    w = small(64, 96)
    vtcm = m.memory("vtcm")
    vtcm.write(0x0, L.pack_nhwc(x, 0b11100))
    vtcm.write(0x2000, L.pack_weights(w))
    vtcm.write(0x8000, L.pack_bias(np.ones(64)))
    run(m, f"Q6_activation_hf_mxmem_RR_deep(0x0, 2 << 11 | {MASK} | 31 << 2)",
        "Q6_weight_hf_mxmem_RR_deep(0x2000, 96 * 128 - 1)",
        "Q6_bias_mxmem2_A(0x8000)", "Q6_cvt_hf_acc_R(0)", f"Q6_mxmem_cvt_RR(0x4000, {MASK})",
        "Q6_bias_mxmem2_A(0x8100)", "Q6_cvt_hf_acc_R(0)", f"Q6_mxmem_cvt_RR(0x4800, {MASK})")
    want = np.einsum("hwc,oc->hwo", x.astype(np.float64), w.astype(np.float64))
    got = L.unpack_nhwc(vtcm.read(0x4000, 4096), 8, 4, 64, 0b11100)
    # the two 32-filter croutons are the channel groups of an (8, 4, 64) tensor
    assert (got == want.astype(np.float16)).all()


def test_single_reads_across_two_croutons():
    m = hwsim.machine("hmx")
    x = small(16, 4, 32)  # two tiles down: croutons at 0x0 and 0x800
    w = small(32, 32)
    vtcm = m.memory("vtcm")
    vtcm.write(0x0, L.pack_nhwc(x, 0b11100))
    vtcm.write(0x1000, L.pack_weights(w))
    vtcm.write(0x3000, L.pack_bias(np.ones(32)))
    offset = (0b01100 >> 1) << 7  # Y = 3: rows 3..10 of the 16
    run(m, f"Q6_activation_hf_mxmem_RR_single(0x0 | {offset} | 8 << 2, 0x800 | {MASK} | 15 << 2)",
        "Q6_weight_hf_mxmem_RR(0x1000 + 4 * 128, 4 * 128 - 1)", *CONVERT_WRITE)
    window = x[3:11, :, 8:16].astype(np.float64)
    want = np.einsum("hwc,oc->hwo", window, w[:, 8:16].astype(np.float64))
    assert (L.unpack_nhwc(vtcm.read(0x4000, 2048), 8, 4, 32, 0b11100) == want).all()


def test_inputs_with_inf_nan_follow_usr20():
    act, wgt = small(32, 32), small(32, 32)
    act[0, 0] = np.inf  # 0x7C00
    wgt[:, 0] = np.arange(32) % 2  # filters 0, 2, ... weigh it by 0; 1, 3, ... by 1
    m, a, w = machine_with(act=act, wgt=wgt)
    run(m, "USR = 1 << 20", ACT, "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)", *CONVERT_WRITE)
    row = output(m)[0].astype(np.float16).view(np.uint16)
    assert (row[0::2] == 0xFFFF).all() and (row[1::2] == 0x7C00).all()  # Inf * 0 is NaN
    run(m, "USR = 0", ACT, "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)", *CONVERT_WRITE)
    row = output(m)[0].astype(np.float16).view(np.uint16)
    rest = a[0, 1:] @ w[:, 1:].T  # exact
    want = [O.round_output(O.Fraction(65536 * (o % 2)) + O.Fraction(rest[o]),
                           65536 * (o % 2) + rest[o] < 0, 10, 0, 0) for o in range(32)]
    assert row.tolist() == want  # Inf/NaN off: 0x7C00 is the finite 65536


@pytest.mark.parametrize("lines, message", [
    (["Q6_activation_hf_mxmem_RR(0x800000, 0x77c)", "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)"],
     r"t:1:27: .*crouton 0: memory fault in vtcm: 2048 bytes at 0x800000: outside"),
    (["Q6_activation_hf_mxmem_RR_deep(0x7ff000, 2 << 11 | 0x77c)",
      "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)"],
     r"t:1:42: .*crouton 2: memory fault in vtcm: 2048 bytes at 0x800000"),
    (["Q6_activation_hf_mxmem_RR_single(0x0, -2048 | 0x77c)",
      "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)"], r"t:1:39: .*crouton 1: .* at -0x800"),
    (["Q6_activation_hf_mxmem_RR(0x0, 0x77c)", "Q6_weight_hf_mxmem_RR(0x7ffc00, 0x7ff)"],
     r"t:2:33: .*weight range: memory fault in vtcm: 2048 bytes at 0x7ffc00"),
    (["Q6_bias_mxmem2_A(0x7fff00 + 0x100)"], r"t:1:18: .*256 bytes at 0x800000"),
    (["hvx_pack_act(0x10, 0x0, 8, 4, 32, 0b11100)"],
     r"t:1:14: .*dst = 0x10: expected a multiple of 2048"),
    (["hvx_add(0x0, 0x100, 0x200, 0)"], r"t:1:28: .*n = 0: expected a positive size"),
    (["hvx_clamp(0x0, 0x0, 64, 0, 0x10000)"], r"t:1:28: .*hi = 0x10000: expected 0..0xffff"),
    (["hvx_relu(0x7ffff0, 0x0, 64)"], r"memory fault in vtcm: 128 bytes at 0x7ffff0"),
    (["dma_ddr_to_vtcm(0x0, 0x0, 64)"], r"t:1:1: .*memory fault in ddr: .* at 0x0: outside"),
    (["dma_ddr_to_vtcm_2d(0x0, 0x80000000, 64, 0, 64, 64)"],
     r"t:1:41: .*rows = 0: expected a positive size"),
])
def test_machine_program_errors(lines, message):
    m = hwsim.machine("hmx")
    with pytest.raises(ProgramError, match=message):
        m.parse([(line, O_loc(i)) for i, line in enumerate(lines)])


def O_loc(i):
    from hwsim.errors import Location
    return Location("t", i + 1, 1)


def test_python_programs_pair_activations_with_weights():
    from hwsim.isa.hmx import Multiply, parse_program
    m, a, w = machine_with()
    pair = parse_program([(ACT, O_loc(0)), ("Q6_weight_hf_mxmem_RR(0x800, 0x7ff)", O_loc(1))])[0]
    act, wgt = pair.act, pair.wgt
    with pytest.raises(ProgramError, match="pair them with hwsim.isa.hmx.Multiply"):
        m.run([act, wgt])
    m.run([Multiply(act, wgt)])
    assert m.state.acc[0].any()


def test_configuration_errors():
    with pytest.raises(ConfigError, match="vtcm_base 0x100"):
        hwsim.machine("hmx", vtcm_base=0x100)
    with pytest.raises(ConfigError, match="expected one of 6, 7, 8"):
        hwsim.machine("hmx", acc_exp_bits=9)
    m = hwsim.machine("hmx", vtcm_base=0xD800_0000, vtcm_size=4 << 20)
    assert m.memory("vtcm").base == 0xD800_0000 and m.memory("vtcm").size == 4 << 20


# -- timing ---------------------------------------------------------------------------------------

def intervals(result, unit):
    return [(s, s + c, label) for s, c, label, _ in result.log(unit)]


def test_convert_overlaps_multiply_into_the_other_accumulator():
    m, _, _ = machine_with()
    mul = [ACT, "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)"]
    swap = run(m, *mul, "Q6_bias_mxmem2_A(0x3000)", "Q6_cvt_hf_acc_R(0)", *mul,
               "Q6_cvt_hf_acc_R(0)")
    mpy, cvt = intervals(swap, "mpy"), [i for i in intervals(swap, "cvt") if "cvt acc" in i[2]]
    assert mpy[1][2].endswith("acc1") and cvt[0][2].startswith("cvt acc0")
    assert cvt[0][0] < mpy[1][1] and mpy[1][0] < cvt[0][1]  # the two intervals intersect
    retain = run(m, *mul, "Q6_cvt_hf_acc_R(1)", *mul, "Q6_cvt_hf_acc_R(1)")
    mpy, cvt = intervals(retain, "mpy"), [i for i in intervals(retain, "cvt") if "cvt" in i[2]]
    assert mpy[1][0] >= cvt[0][0]  # same accumulator: the multiply waits for the reader
    assert retain.cycles > swap.cycles - 3


def test_multiply_cycles_follow_the_weight_vectors():
    m, _, _ = machine_with()
    one = run(m, ACT, "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)")
    eight = run(m, f"Q6_activation_hf_mxmem_RR(0x0 | 8 << 2, {MASK} | 15 << 2)",
                "Q6_weight_hf_mxmem_RR(0x800, 4 * 128 - 1)")
    assert one.cycles == 8 + 16 and eight.cycles == 8 + 4  # setup + one vector per cycle
    assert one.stats["macs"] == 32 * 32 * 32 and eight.stats["macs"] == 8 * 32 * 32
    slow = m.run(ACT + "\nQ6_weight_hf_mxmem_RR(0x800, 0x7ff)\n",
                 params={"mpy_cycles_per_vector": 2.0})
    assert slow.cycles == 8 + 32


def test_dma_without_wait_reads_stale_bytes():
    m = hwsim.machine("hmx")
    x = small(128)
    m.memory("ddr").write(0x8000_0000, x)
    m.memory("vtcm").write(0x0, np.ones(128, np.float16))
    copy = "dma_ddr_to_vtcm(0x0, 0x80000000, 256)"
    run(m, copy, "hvx_add(0x1000, 0x0, 0x0, 128)")
    stale = m.memory("vtcm").read(0x1000, 256).view(np.float16)
    assert (stale == 2).all()  # added the old ones: the DMA had not landed
    run(m, copy, "dma_wait()", "hvx_add(0x1000, 0x0, 0x0, 128)")
    assert (m.memory("vtcm").read(0x1000, 256).view(np.float16) == 2 * x).all()


def test_hvx_and_hmx_are_ordered_through_vtcm():
    m = hwsim.machine("hmx")
    x, w = small(8, 4, 32), small(32, 32)
    vtcm = m.memory("vtcm")
    vtcm.write(0x10000, x)
    vtcm.write(0x12000, w)
    vtcm.write(0x3000, L.pack_bias(np.ones(32)))
    r = run(m, "hvx_pack_act(0x0, 0x10000, 8, 4, 32, 0b11100)",
            "hvx_pack_wgt(0x800, 0x12000, 32, 32)", ACT, "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)",
            *CONVERT_WRITE, "hvx_unpack_act(0x5000, 0x4000, 8, 4, 32, 0b11100)")
    want = np.einsum("hwc,oc->hwo", x.astype(np.float64), w.astype(np.float64))
    assert (vtcm.read(0x5000, 2048).view(np.float16).reshape(8, 4, 32) == want).all()
    hvx = intervals(r, "hvx")
    assert hvx[0][1] - hvx[0][0] == int(np.ceil(16 * 6.1)) and hvx[1][1] - hvx[1][0] == 184
    assert intervals(r, "mpy")[0][0] >= hvx[1][1]  # the multiply waits for its weights


# -- parameters -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_every_parameter_is_read_by_a_run_and_has_a_source():
    m = hwsim.machine("hmx")
    for trace in sorted(hwsim_examples().glob("*.trace")):
        m.run(trace)
    run(m, "USR = 0", "Q6_mxclracc_hf()")
    assert m.params.unread() == []
    for row in PARAMS:
        source = row.source.strip()
        assert len(source) > 20, row.name
        if source.startswith("assumption"):
            assert len(source.split(":", 1)[1].strip()) > 15, row.name  # says why
        else:
            assert any(ref in source for ref in ("sources.md", "manual", "qemu")), row.name


def hwsim_examples():
    from pathlib import Path
    return Path(__file__).resolve().parents[1] / "examples" / "hmx"


def test_calibration_against_the_v79_measurements():
    # sources.md#hmx (V79): engine call 22-26 cycles; crouton pack 91-104 warm, 392 cold from DDR;
    # weight crouton pack 180-188; output crouton unpack 86-126
    m, _, _ = machine_with()
    assert 22 <= run(m, ACT, "Q6_weight_hf_mxmem_RR(0x800, 0x7ff)").cycles <= 26
    pack = "hvx_pack_act(0x10000, 0x20000, 8, 4, 32, 0b11100)"
    hvx_cycles = lambda r: r.stats["units"]["hvx"]["busy"]  # noqa: E731
    assert 91 <= hvx_cycles(run(m, pack)) <= 104
    assert 180 <= hvx_cycles(run(m, "hvx_pack_wgt(0x10000, 0x20000, 32, 32)")) <= 188
    assert 86 <= hvx_cycles(run(m, "hvx_unpack_act(0x20000, 0x10000, 8, 4, 32, 0b11100)")) <= 126
    cold = run(m, "dma_ddr_to_vtcm(0x20000, 0x80000000, 2048)", "dma_wait()", pack).cycles
    assert abs(cold - 392) / 392 < 0.06  # 409 cycles: DMA setup + 2 KB at 96.4 GB/s + latency
