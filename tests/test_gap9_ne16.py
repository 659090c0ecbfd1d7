"""NE16 numerics: every mode against the independent model in tests/gap9_oracle.py, through the
compiled datapath (``ne16.kernel``) and its numpy twin (``ne16.datapath.run_job``) alike."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hwsim.errors import MemoryFault, ProgramError
from hwsim.isa import ne16 as isa
from hwsim.memory.space import AddressSpace
from hwsim.targets.gap9.ne16 import kernel as ne16_kernel
from hwsim.targets.gap9.ne16 import layout
from hwsim.targets.gap9.ne16.datapath import (depthwise_wrap32, depthwise_wrap32_np, gemm_wrap32,
                                              gemm_wrap32_np, run_job)
from hwsim.targets.gap9.ne16.driver import LayerSpec, conv_jobs
from hwsim.targets.gap9.ne16.job import Ne16Job
from tests import gap9_oracle as ref
from tests.profiles import examples

BASE = 0x10000000
X, W, OUT, SCALE, BIAS, SHIFT = (BASE + o for o in (0x100, 0x8000, 0x10000, 0x1F000, 0x1F400,
                                                    0x1F800))


def run_layer(spec, x, w_stored, scale=None, bias=None, shift=None, l1=None, kernels=None,
              **readings):
    """Place the operands in a fresh L1, run the driver's jobs, return the output tensor.
    Each job runs through the compiled datapath and through the twin (on a copy of L1, with
    the twin's ``kernels``): the two must leave L1 byte for byte the same."""
    l1 = l1 or AddressSpace("l1", 128 << 10, BASE)
    l1.write(X, np.ascontiguousarray(x))
    if spec.linear:
        packed = layout.pack_linear_weights(w_stored, spec.weight_bits)
    else:
        packed = layout.pack_conv_weights(w_stored, spec.weight_bits, spec.in_bits == 16,
                                          spec.depthwise)
    l1.write(W, packed)
    if scale is not None:
        l1.write(SCALE, layout.pack_scale(scale, spec.norm_bits))
    if bias is not None:
        l1.write(BIAS, layout.pack_bias(bias))
    if shift is not None:
        l1.write(SHIFT, layout.pack_shift(shift))
    for n, regs in enumerate(conv_jobs(spec, X, OUT, W, SCALE, SHIFT, BIAS)):
        job = Ne16Job(tuple(regs.get(r.name, 0) for r in isa.REGISTERS), n)
        run_both(job, l1, kernels, **readings)
    count = spec.k_out if spec.linear else spec.h_out * spec.w_out * spec.k_out
    dtype = {8: "u1" if spec.relu else "i1", 16: "<u2" if spec.relu else "<i2",
             32: "<u4" if spec.relu and spec.quant else "<i4"}[spec.out_bits if spec.quant else 32]
    nbytes = count * np.dtype(dtype).itemsize
    return l1.read(OUT, nbytes).view(dtype).astype(np.int64)


def run_both(job, l1, kernels=None, **readings):
    """Run ``job`` on ``l1`` with the compiled datapath, check the twin writes the same."""
    twin = AddressSpace("l1", l1.size, l1.base)
    twin.data[:] = l1.data
    offsets, data = run_job(job, twin, kernels=kernels, **readings)
    twin.data[offsets] = data
    ne16_kernel.start(job, l1, **readings)()
    assert np.array_equal(l1.data, twin.data), f"job {job.index}: the datapaths differ at " \
        f"{np.flatnonzero(l1.data != twin.data)[:8]}"


def operands(rng, spec, offset=None):
    bits = spec.weight_bits
    offset = layout.weight_offset(bits) if offset is None else offset
    hi = 1 << spec.in_bits
    if spec.linear:
        x = rng.integers(0, hi, spec.k_in)
        x = np.pad(x, (0, -spec.k_in % 16)).astype(np.uint16 if spec.in_bits == 16 else np.uint8)
        stored = rng.integers(0, 1 << bits, (spec.k_out, spec.k_in))
    else:
        x = rng.integers(0, hi, (spec.h_in, spec.w_in, spec.k_in))
        x = x.astype(np.uint16 if spec.in_bits == 16 else np.uint8)
        shape = (spec.k_out, 1) if spec.depthwise else (spec.k_out, spec.k_in)
        stored = rng.integers(0, 1 << bits, shape + (spec.kernel, spec.kernel))
    return x, stored, stored.astype(np.int64) + offset


def reference_acc(spec, x, w):
    if spec.linear:
        return ref.linear(x[:spec.k_in], w)
    taps = None
    if any(spec.filter_mask):
        t, r, b, l = spec.filter_mask
        taps = np.ones((3, 3), np.int64)
        taps[:t, :] = 0
        taps[:, 3 - r:] = 0
        taps[3 - b:, :] = 0
        taps[:, :l] = 0
    return ref.conv(x, w, spec.stride, spec.padding, spec.pad_value, spec.depthwise, taps)


CONV_CASES = [
    dict(h_in=7, w_in=8, k_in=20, k_out=40, padding=(1, 1, 1, 1), pad_value=0),
    dict(h_in=6, w_in=5, k_in=20, k_out=33, padding=(1, 1, 1, 1), pad_value=9, weight_bits=4),
    dict(h_in=8, w_in=7, k_in=35, k_out=17, padding=(0, 1, 1, 0), pad_value=200, weight_bits=2),
    dict(h_in=9, w_in=9, k_in=24, k_out=24, depthwise=True, padding=(1, 1, 1, 1), pad_value=5,
         weight_bits=5),
    dict(h_in=5, w_in=7, k_in=35, k_out=33, kernel=1, weight_bits=3),
    dict(h_in=9, w_in=8, k_in=16, k_out=32, stride=2, padding=(1, 1, 1, 1), pad_value=4),
    dict(h_in=10, w_in=7, k_in=12, k_out=12, depthwise=True, stride=2, padding=(0, 1, 1, 1),
         weight_bits=6),
    dict(h_in=5, w_in=6, k_in=10, k_out=33, in_bits=16, padding=(1, 1, 1, 1), pad_value=700,
         weight_bits=6),
    dict(h_in=4, w_in=4, k_in=9, k_out=20, in_bits=16, kernel=1, weight_bits=7),
    dict(h_in=6, w_in=6, k_in=16, k_out=8, filter_mask=(1, 0, 0, 1), padding=(1, 1, 1, 1)),
    dict(h_in=1, w_in=1, k_in=300, k_out=40, kernel=1, linear=True),
    dict(h_in=1, w_in=1, k_in=37, k_out=5, kernel=1, linear=True, in_bits=16, weight_bits=2),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in
                                                                     c.items()))
def test_accumulators_match_the_reference(case):
    spec = LayerSpec(quant=False, out_bits=32, **case)
    x, stored, signed = operands(np.random.default_rng(len(str(case))), spec)
    got = run_layer(spec, x, stored)
    want = ref.wrap32(reference_acc(spec, x, signed)).reshape(-1)
    assert np.array_equal(got, want)


NORM_CASES = [
    dict(norm_bits=8, out_bits=8, relu=True, shift=9, norm_bias=True),
    dict(norm_bits=16, out_bits=8, relu=False, shift=14),
    dict(norm_bits=32, out_bits=32, relu=False, shift=3, norm_bias=True),
    dict(norm_bits=8, out_bits=16, relu=True, norm_shift=True, norm_bias=True),
    dict(norm_bits=16, out_bits=16, relu=False, norm_shift=True),
]


@pytest.mark.parametrize("norm", NORM_CASES, ids=str)
@pytest.mark.parametrize("geometry", [dict(h_in=5, w_in=6, k_in=20, k_out=40,
                                           padding=(1, 1, 1, 1), weight_bits=5),
                                      dict(h_in=5, w_in=4, k_in=18, k_out=18, depthwise=True,
                                           padding=(1, 1, 1, 1)),
                                      dict(h_in=1, w_in=1, k_in=70, k_out=36, kernel=1,
                                           linear=True)], ids=["3x3", "dw", "linear"])
def test_normquant_matches_the_reference(norm, geometry):
    spec = LayerSpec(**geometry, **norm)
    rng = np.random.default_rng(7)
    x, stored, signed = operands(rng, spec)
    k = spec.k_out
    scale = rng.integers(1, min(1 << spec.norm_bits, 1 << 17), k)
    bias = rng.integers(-(1 << 18), 1 << 18, k) if spec.norm_bias else None
    shift = rng.integers(8, 20, k) if spec.norm_shift else spec.shift
    got = run_layer(spec, x, stored, scale, bias, shift if spec.norm_shift else None)
    want = ref.normquant(reference_acc(spec, x, signed), scale, bias, shift, spec.relu,
                         spec.out_bits)
    assert np.array_equal(got, want.reshape(-1))


def test_bias_add_readings_differ_only_on_overflow():
    spec = LayerSpec(h_in=3, w_in=3, k_in=16, k_out=8, padding=(1, 1, 1, 1), norm_bits=32,
                     out_bits=32, norm_bias=True, relu=False)
    rng = np.random.default_rng(3)
    x, stored, signed = operands(rng, spec)
    scale = np.full(8, 1 << 20)                      # products overflow int32
    bias = np.full(8, (1 << 31) - 1)
    acc = reference_acc(spec, x, signed)
    for reading, saturates in (("wrap", False), ("saturate", True)):
        got = run_layer(spec, x, stored, scale, bias, bias_add=reading)
        want = ref.normquant(acc, scale, bias, 0, False, 32, bias_saturates=saturates)
        assert np.array_equal(got, want.reshape(-1))
    assert not np.array_equal(run_layer(spec, x, stored, scale, bias, bias_add="wrap"),
                              run_layer(spec, x, stored, scale, bias, bias_add="saturate"))


def test_rounding_readings():
    base = dict(h_in=3, w_in=3, k_in=16, k_out=8, padding=(1, 1, 1, 1), shift=6, relu=False)
    rng = np.random.default_rng(4)
    spec = LayerSpec(**base)
    x, stored, signed = operands(rng, spec)
    scale = rng.integers(1, 32, 8)
    acc = ref.wrap32(reference_acc(spec, x, signed))
    floor = run_layer(spec, x, stored, scale, rounding="none")
    rounded = run_layer(spec, x, stored, scale, rounding="config0")
    assert np.array_equal(floor, ref.normquant(acc, scale, None, 6, False, 8).reshape(-1))
    want = np.clip((acc * scale + 32) >> 6, -128, 127).reshape(-1)
    assert np.array_equal(rounded, want)
    # CONFIG0.no_round = 1 switches the rounding off again
    off = LayerSpec(**base, extra={"no_round": 1})
    assert np.array_equal(run_layer(off, x, stored, scale, rounding="config0"), floor)


def test_weight_offset_register_is_applied():
    spec = LayerSpec(h_in=4, w_in=4, k_in=16, k_out=8, padding=(1, 1, 1, 1), quant=False,
                     out_bits=32, weight_bits=4, offset=-3)
    x, stored, signed = operands(np.random.default_rng(5), spec, offset=-3)
    assert np.array_equal(run_layer(spec, x, stored),
                          ref.wrap32(reference_acc(spec, x, signed)).reshape(-1))


def test_streamin_accumulates_partial_sums():
    rng = np.random.default_rng(6)
    full = LayerSpec(h_in=5, w_in=5, k_in=32, k_out=16, padding=(1, 1, 1, 1), quant=False,
                     out_bits=32)
    x, stored, signed = operands(rng, full)
    halves = [LayerSpec(h_in=5, w_in=5, k_in=16, k_out=16, padding=(1, 1, 1, 1), quant=False,
                        out_bits=32, streamin=bool(i)) for i in range(2)]
    l1 = AddressSpace("l1", 128 << 10, BASE)
    for i, spec in enumerate(halves):
        got = run_layer(spec, np.ascontiguousarray(x[:, :, 16 * i:16 * (i + 1)]),
                        stored[:, 16 * i:16 * (i + 1)], l1=l1)
    assert np.array_equal(got, ref.wrap32(reference_acc(full, x, signed)).reshape(-1))


def test_numba_kernels_match_their_numpy_twins():
    rng = np.random.default_rng(8)
    for dtype in (np.uint8, np.uint16):
        x = rng.integers(0, np.iinfo(dtype).max, (37, 290)).astype(dtype)
        w = rng.integers(-(1 << 31), 1 << 31, (19, 290)).astype(np.int32)
        assert np.array_equal(gemm_wrap32(x, w), gemm_wrap32_np(x, w))
    x = rng.integers(0, 255, (40, 9, 16)).astype(np.uint8)
    w = rng.integers(-(1 << 31), 1 << 31, (16, 9)).astype(np.int32)
    assert np.array_equal(depthwise_wrap32(x, w), depthwise_wrap32_np(x, w))
    spec = LayerSpec(h_in=6, w_in=6, k_in=20, k_out=40, padding=(1, 1, 1, 1), quant=False,
                     out_bits=32)
    xs, stored, _ = operands(rng, spec)
    twins = (gemm_wrap32_np, depthwise_wrap32_np)
    fast = run_layer(spec, xs, stored)
    assert np.array_equal(fast, run_layer(spec, xs, stored, kernels=twins))


def job_from(**changes):
    spec = LayerSpec(h_in=4, w_in=4, k_in=16, k_out=16)
    regs = conv_jobs(spec, X, OUT, W)[0]
    regs.update(changes)
    return Ne16Job(tuple(regs.get(r.name, 0) for r in isa.REGISTERS), 3)


@pytest.mark.parametrize("changes, message", [
    (dict(CONFIG0=isa.CONFIG0.encode(filter_mode=1, mode16=1, quant=1)), "16-bit input"),
    (dict(CONFIG0=isa.CONFIG0.encode(linear=1, quant=1)), "linear mode needs"),
    (dict(CONFIG0=isa.CONFIG0.encode(streamin=1, quant=1)), "streamin needs 32-bit"),
    (dict(CONFIG0=isa.CONFIG0.encode(out_mode=0)), "needs quant=1"),
    (dict(SUBTILE_NB1=0), "SUBTILE_NB ho is 0"),
    (dict(CONFIG0=isa.CONFIG0.encode(filter_mode=2, quant=1), FILTER_MASK=0x01000000,
          SUBTILE_REM2=0),
     "filter mask"),
])
def test_unsupported_jobs_are_rejected(changes, message):
    with pytest.raises(ProgramError, match=f"ne16 job 3: .*{message}"):
        job_from(**changes)


def test_reserved_config0_bits_are_rejected():
    from hwsim.errors import EncodingError
    with pytest.raises(EncodingError, match="CONFIG0: field filter_mode = 3"):
        isa.CONFIG0.decode(3 << 5)
    with pytest.raises(EncodingError, match=r"reserved\[31:26\]"):
        isa.CONFIG0.decode(1 << 30)


END = BASE + (128 << 10)


@pytest.mark.parametrize("changes, message", [
    (dict(INFEAT_PTR=END - 8), "reads input outside"),
    (dict(WEIGHTS_PTR=END - 64), "reads weights outside"),
    (dict(SCALE_PTR=END - 4), "reads scale outside"),
    (dict(OUTFEAT_PTR=BASE - 16), "writes its output outside"),
], ids=["input", "weights", "scale", "output"])
def test_accesses_outside_l1_fault(changes, message):
    job = job_from(**{"SCALE_PTR": SCALE, **changes})
    for datapath in (run_job, ne16_kernel.start):
        with pytest.raises(MemoryFault, match=f"ne16 job 3 {message}"):
            datapath(job, AddressSpace("l1", 128 << 10, BASE))


@pytest.mark.parametrize("norm", [dict(quant=False, out_bits=32)] + NORM_CASES, ids=str)
@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in
                                                                     c.items()))
def test_datapaths_agree_on_arbitrary_bytes(case, norm):
    """Every mode, with every byte the jobs read random (weights, inputs, scales, biases,
    shifts, streamin words) and both readings of the unspecified arithmetic."""
    spec = LayerSpec(**{**case, **norm})
    rng = np.random.default_rng(len(str(case)) + 7 * len(str(norm)))
    for readings in (dict(bias_add="wrap", rounding="none"),
                     dict(bias_add="saturate", rounding="config0")):
        l1 = AddressSpace("l1", 128 << 10, BASE)
        l1.data[:] = rng.integers(0, 256, l1.size)
        for n, regs in enumerate(conv_jobs(spec, X, OUT, W, SCALE, SHIFT, BIAS)):
            run_both(Ne16Job(tuple(regs.get(r.name, 0) for r in isa.REGISTERS), n), l1,
                     **readings)


@settings(max_examples=examples(25), deadline=None)
@given(data=st.data())
def test_random_layers_match_the_reference(data):
    draw = data.draw
    kernel = draw(st.sampled_from([1, 3]))
    depthwise = kernel == 3 and draw(st.booleans())
    in_bits = 8 if depthwise else draw(st.sampled_from([8, 16]))
    k_in = draw(st.integers(1, 40))
    k_out = k_in if depthwise else draw(st.integers(1, 40))
    stride = 2 if kernel == 3 and draw(st.booleans()) else 1
    pad = tuple(draw(st.integers(0, 1)) for _ in range(4)) if kernel == 3 else (0, 0, 0, 0)
    h_in = draw(st.integers(max(1, 3 - pad[0] - pad[1]) if kernel == 3 else 1, 9))
    w_in = draw(st.integers(max(1, 3 - pad[2] - pad[3]) if kernel == 3 else 1, 9))
    spec = LayerSpec(h_in=h_in, w_in=w_in, k_in=k_in, k_out=k_out, kernel=kernel,
                     depthwise=depthwise, stride=stride, padding=pad, in_bits=in_bits,
                     pad_value=draw(st.integers(0, (1 << in_bits) - 1)),
                     weight_bits=draw(st.integers(1, 8)), quant=False, out_bits=32)
    x, stored, signed = operands(np.random.default_rng(draw(st.integers(0, 1 << 20))), spec)
    got = run_layer(spec, x, stored)
    assert np.array_equal(got, ref.wrap32(reference_acc(spec, x, signed)).reshape(-1))


def test_weights_decoded_again_when_their_bytes_change():
    """The compiled datapath keeps decoded weights per job signature and pointer: a weight
    block reloaded into the same slot must be decoded again."""
    spec = LayerSpec(h_in=5, w_in=5, k_in=20, k_out=40, padding=(1, 1, 1, 1), quant=False,
                     out_bits=32)
    rng = np.random.default_rng(9)
    l1 = AddressSpace("l1", 128 << 10, BASE)
    l1.data[:] = rng.integers(0, 256, l1.size)
    job = Ne16Job(tuple(conv_jobs(spec, X, OUT, W)[0].get(r.name, 0) for r in isa.REGISTERS))
    before = run_layer(spec, *operands(rng, spec)[:2], l1=l1)
    for offset in (0, 37, layout.conv_weight_bytes(40, 20, 9, 8) - 1):  # first, any, last byte
        l1.data[W - BASE + offset] ^= 0x5A
        run_both(job, l1)
    assert not np.array_equal(before, l1.read(OUT, before.size * 4).view("<i4"))
