"""The GAP9 machine: program text and builder, the job queue, timing, contention, parameters."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import hwsim
from hwsim.errors import ProgramError, TraceSyntaxError
from hwsim.isa import gap9 as prog
from hwsim.isa.arguments import TensorRef
from hwsim.targets.gap9.ne16.driver import LayerSpec, conv_jobs
from hwsim.targets.gap9.tcdm import core_stalls, core_stalls_np

L1, L2 = 0x10000000, 0x1C000000
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "gap9"


def fields(instr):
    return {k: v for k, v in dataclasses.asdict(instr).items() if k not in ("loc", "arg_locs")}


def test_builder_makes_the_instructions_the_text_makes():
    text = """dma l2:0x1c000000 -> l1:0x10000000 64
dma l2:0x1c000100 -> l1:0x10000100 16 rows=4 src_stride=64 dst_stride=16
dma wait 0 1
ne16 acquire
ne16 CONFIG0 filter_mode=1x1 weight_bits_m1=3 quant=1
ne16 WEIGHT_OFFSET -8
ne16 commit
ne16 wait
cluster clamp in=l1:0x10000000:i8:4x16 out=l1:0x10000400:i8:4x16 min=-3 max=9
barrier"""
    parsed = hwsim.machine("gap9").parse(
        [(line, prog.Location("t", n + 1, 1)) for n, line in enumerate(text.splitlines())])
    built = prog.Program()
    assert built.dma("l2", L2, "l1", L1, 64) == 0
    assert built.dma("l2", L2 + 0x100, "l1", L1 + 0x100, 16, rows=4, src_stride=64,
                     dst_stride=16) == 1
    built.dma_wait(0, 1)
    built.ne16_job({"CONFIG0": {"filter_mode": "1x1", "weight_bits_m1": 3, "quant": 1},
                    "WEIGHT_OFFSET": -8}, wait=True)
    in_t = TensorRef("l1", L1, "i8", (4, 16))
    out_t = TensorRef("l1", L1 + 0x400, "i8", (4, 16))
    built.cluster("clamp", **{"in": in_t, "out": out_t, "min": -3, "max": 9})
    built.barrier()
    assert [type(i) for i in parsed] == [type(i) for i in built]
    assert [fields(i) for i in parsed] == [fields(i) for i in built]


@pytest.mark.parametrize("line, at, message", [
    ("dma l4:0x0 -> l1:0x10000000 4", "l4", "dma source: expected SPACE:ADDR"),
    ("dma l3:0x0 -> l1:0x10000000 4", "dma", "micro-DMA moves between l3 and l2, found l3 -> l1"),
    ("dma l2:0x1c000000 -> l1:0x10000000 four", "four", "NBYTES: expected an integer"),
    ("dma l2:0x1c000000 -> l1:0x10000000 4 strides=3", "3", "unknown option 'strides'"),
    ("dma l1:0x10000000 -> mram:0x0 4", "dma", "space is read-only"),
    ("dma l2:0x1c000000 -> l1:0x1001fff0 64", "dma", "outside"),
    ("ne16 CONFIG0 filter_mode=5x5", "filter",
     "filter_mode = '5x5', expected an integer or one of 3x3, 3x3dw, dw, 1x1"),
    ("ne16 CONFIG0 out_mode=3", "out", "out_mode = 3, expected 0 (8 bit), 1 (16), 2 (32)"),
    ("ne16 PADDING top=16", "top", "field top = 0x10, expected 0..15"),
    ("ne16 WEIGTHS_PTR 0x10000000", "WEIG", "expected acquire, commit, status, wait or one of"),
    ("cluster conv3d in=l1:0x10000000:i8:1x1x1x1", "cluster", "unknown kernel 'conv3d'"),
    ("cluster clamp in=l2:0x1c000000:i8:4 out=l1:0x10000000:i8:4 min=0 max=1", "l2:",
     "tensor in is in l2"),
    ("cluster clamp in=l1:0x10000000:i8:4 out=l1:0x10000000:i8:5 min=0 max=1", "l1:0x10000000:i8:5",
     "expected shape 4, found 5"),
    ("cluster clamp in=l1:0x10000000:i8:4 out=l1:0x10000000:i8:4 min=0 max=1 x=2", "2",
     "unknown argument 'x'"),
    ("cluster clamp in=l1:0x10000000:f32:4", "l1:", "dtype in i8, u8"),
    ("cluster clamp in=l1:0x10000000:i8:4 out=l1:0x10000000:i8:4 max=1", "cluster",
     "missing argument min"),
    ("cluster conv2d in=l1:0x10000000:i8:1x6x6x8 weight=l1:0x10001000:i8:4x3x3x8 "
     "out=l1:0x10002000:i32:1x2x2x4 stride=2,2", "cluster", "does not divide exactly"),
    ("cluster rescale in=l1:0x10000000:i32:4 mult=l1:0x10000100:i32:1 "
     "shift=l1:0x10000200:i8:1 out=l1:0x10000300:i8:4 in_zp=3", "cluster",
     "input zero point 3 not allowed for i32 (TOSA ERROR_IF)"),
    ("barrier now", "barrier", "expected dma, ne16, cluster, barrier or layer"),
    ("layer 3", "layer", "expected dma, ne16, cluster, barrier or layer"),
])
def test_parse_errors_name_line_column_and_field(line, at, message):
    with pytest.raises(TraceSyntaxError) as info:
        hwsim.machine("gap9").run(f".target gap9\n\n   {line}\n")
    assert str(info.value).startswith(f"<trace>:3:{4 + line.index(at)}:")
    assert message in str(info.value)


def test_program_errors_name_the_instruction():
    m = hwsim.machine("gap9")
    with pytest.raises(ProgramError, match=r"<trace>:2:1: dma wait 3: no such transfer"):
        m.run(".target gap9\ndma wait 3\n")
    with pytest.raises(ProgramError, match=r"<trace>:2:1: ne16 job 0: SUBTILE_NB ko is 0"):
        m.run(".target gap9\nne16 commit\n")


def conv_program(spec, jobs=1, wait=True, dma_bytes=0):
    """A program running ``jobs`` copies of a layer on data already in L1."""
    p = prog.Program()
    if dma_bytes:
        p.dma("l2", L2, "l1", L1 + 0x10000, dma_bytes)
    regs = conv_jobs(spec, L1, L1 + 0x8000, L1 + 0x4000, L1 + 0x7000)[0]
    for _ in range(jobs):
        p.ne16_job(regs)
    if wait:
        p.ne16_wait()
    if dma_bytes:
        p.dma_wait()
    return p


def ne16_busy(spec):
    return hwsim.machine("gap9").run(conv_program(spec)).stats["units"]["ne16"]["busy"]


def test_fewer_weight_bits_speed_up_3x3_and_not_1x1():
    def layer(bits, kernel):
        return LayerSpec(h_in=9, w_in=9, k_in=32, k_out=32, kernel=kernel, weight_bits=bits,
                         padding=(1, 1, 1, 1) if kernel == 3 else (0, 0, 0, 0))
    busy3 = [ne16_busy(layer(b, 3)) for b in (8, 4, 2)]
    assert busy3[0] > busy3[1] > busy3[2]
    busy1 = [ne16_busy(layer(b, 1)) for b in (8, 4, 2)]
    assert busy1[0] == busy1[1] == busy1[2]


def test_two_jobs_queue_back_to_back_and_a_third_waits_for_a_context():
    spec = LayerSpec(h_in=6, w_in=6, k_in=16, k_out=16, padding=(1, 1, 1, 1))
    result = hwsim.machine("gap9").run(conv_program(spec, jobs=3))
    log = result.log("ne16")
    ends = {}
    starts = {}
    for start, cycles, label, args in log:
        job = args["job"]
        starts.setdefault(job, start)
        ends[job] = start + cycles
    assert starts[1] == ends[0] and starts[2] == ends[1]        # no gap between queued jobs
    ctrl = result.stats["units"]["ctrl"]["stalls"]
    assert ctrl.get("wait ne16 context 0", 0) > 0              # job 2 waited for job 0 to end
    assert "wait ne16 context 1" not in ctrl


def test_dma_contention_on_l1_shows_in_ne16_stalls():
    spec = LayerSpec(h_in=12, w_in=12, k_in=16, k_out=32, padding=(1, 1, 1, 1), weight_bits=2)
    alone = hwsim.machine("gap9").run(conv_program(spec))
    busy = hwsim.machine("gap9").run(conv_program(spec, dma_bytes=48 << 10))
    assert "l1 contention" not in alone.stats["units"]["ne16"]["stalls"]
    assert busy.stats["units"]["ne16"]["stalls"]["l1 contention"] > 0
    ne16 = [r.stats["units"]["ne16"] for r in (alone, busy)]
    assert ne16[1]["busy"] + ne16[1]["stalled"] > ne16[0]["busy"] + ne16[0]["stalled"]


def test_core_bank_conflicts_counted_from_addresses():
    rng = np.random.default_rng(0)
    for _ in range(5):
        streams, cores = rng.integers(1, 4), rng.integers(2, 9)
        args = (rng.integers(0, 1 << 12, streams) * 4, rng.integers(0, 64, (streams, cores)) * 4,
                rng.integers(1, 4, streams) * 4, rng.integers(1, 60, cores),
                int(rng.integers(0, 3)), 16, 4, 300)
        assert np.array_equal(core_stalls(*args), core_stalls_np(*args))
    same_bank = (np.array([0]), np.array([[64 * c for c in range(8)]]), np.array([4]),
                 np.full(8, 100), 0, 16, 4, 10000)
    spread = (np.array([0]), np.array([[4 * c for c in range(8)]]), np.array([4]),
              np.full(8, 100), 0, 16, 4, 10000)
    assert core_stalls(*same_bank).max() > 0 and core_stalls(*spread).max() == 0


def test_a_kernel_that_does_not_wait_for_its_dma_reads_stale_bytes():
    m = hwsim.machine("gap9")
    m.memory("l2").write(L2, np.full(16 << 10, 5, np.int8))    # 2048 cycles from L2
    src = f"l1:{L1:#x}:i8:64"
    text = f""".target gap9
dma l2:{L2:#x} -> l1:{L1:#x} {16 << 10}
cluster clamp in={src} out=l1:{L1 + 0x8000:#x}:i8:64 min=-100 max=100
barrier
dma wait
cluster clamp in={src} out=l1:{L1 + 0x8100:#x}:i8:64 min=-100 max=100
barrier
"""
    m.run(text)
    assert m.memory("l1").read(L1 + 0x8000, 64).tolist() == [0] * 64
    assert m.memory("l1").read(L1 + 0x8100, 64).tolist() == [5] * 64


def test_mram_is_read_only_for_programs_and_feeds_the_dma():
    m = hwsim.machine("gap9")
    m.memory("mram").write(0x100, np.arange(32, dtype=np.uint8))
    result = m.run(".target gap9\ndma mram:0x100 -> l1:0x10000000 32\ndma wait\n")
    assert m.memory("l1").read(L1, 32).tolist() == list(range(32))
    assert result.stats["ports"]["mram"]["bytes"] == 32


def test_every_parameter_is_read_and_has_a_source():
    m = hwsim.machine("gap9")
    for row in m.PARAMS:
        assert row.source.strip() and "todo" not in row.source.lower()
    for name in ("conv3x3", "depthwise", "conv1x1"):
        m.run(EXAMPLES / f"{name}.trace")
    p = prog.Program()
    p.dma("mram", 0, "l1", L1, 64, rows=2, src_stride=64, dst_stride=64)
    p.dma_wait()
    p.layer()
    for kernel, args in KERNEL_RUNS:
        p.cluster(kernel, **args)
    p.barrier()
    m.run(p)
    # the lowering reads l1_residency (test_gap9_cluster_mode: ..._l1_residency_none_...)
    assert m.params.unread() == ["l1_residency"]


def _t(offset, dtype, *shape):
    return TensorRef("l1", L1 + offset, dtype, shape)


KERNEL_RUNS = [
    ("conv2d", {"in": _t(0, "i8", 1, 4, 4, 8), "weight": _t(0x100, "i8", 4, 3, 3, 8),
                "out": _t(0x400, "i32", 1, 2, 2, 4)}),
    ("conv2d", {"in": _t(0, "i8", 1, 3, 3, 8), "weight": _t(0x100, "i8", 4, 1, 1, 8),
                "out": _t(0x400, "i32", 1, 2, 2, 4), "stride": (2, 2)}),
    ("conv2d", {"in": _t(0, "i8", 1, 5, 5, 8), "weight": _t(0x100, "i8", 4, 3, 3, 8),
                "out": _t(0x400, "i32", 1, 2, 2, 4), "stride": (2, 2)}),
    ("depthwise_conv2d", {"in": _t(0, "i8", 1, 4, 4, 8), "weight": _t(0x100, "i8", 3, 3, 8, 1),
                          "out": _t(0x400, "i32", 1, 2, 2, 8)}),
    ("avg_pool2d", {"in": _t(0, "i8", 1, 4, 4, 8), "out": _t(0x400, "i8", 1, 2, 2, 8),
                    "kernel": (2, 2), "stride": (2, 2)}),
    ("rescale", {"in": _t(0, "i32", 4, 8), "mult": _t(0x200, "i32", 1),
                 "shift": _t(0x210, "i8", 1), "out": _t(0x400, "i8", 4, 8)}),
    ("table", {"in": _t(0, "i8", 4, 8), "table": _t(0x100, "i8", 256),
               "out": _t(0x400, "i8", 4, 8)}),
    ("softmax", {"in": _t(0, "i8", 2, 10), "out": _t(0x400, "i8", 2, 10),
                 "t0": _t(0x1000, "i16", 513), "t1": _t(0x1000, "i16", 513),
                 "t2": _t(0x1000, "i16", 513), "t3": _t(0x1000, "i16", 513),
                 "diff_mult": 1 << 30, "diff_shift": 23}),
    ("reduce_sum", {"in": _t(0, "i32", 4, 8), "out": _t(0x400, "i32", 1, 8), "axis": 0}),
    ("transpose", {"in": _t(0, "i8", 4, 8), "out": _t(0x400, "i8", 8, 4), "perms": (1, 0)}),
    ("add", {"a": _t(0, "i32", 4, 8), "b": _t(0x100, "i32", 1, 8), "out": _t(0x400, "i32", 4, 8)}),
]


def test_status_shows_the_contexts_holding_jobs():
    spec = LayerSpec(h_in=6, w_in=6, k_in=16, k_out=16, padding=(1, 1, 1, 1))
    p = conv_program(spec, jobs=2, wait=False)
    p.ne16_status()                     # both jobs queued: contexts 0 and 1 hold jobs
    p.ne16_wait()
    p.ne16_status()                     # all ended
    result = hwsim.machine("gap9").run(p)
    ctrl = result.log("ctrl")
    assert [args["status"] for _, _, label, args in ctrl if label == "ne16 status"] == [0x101, 0]
