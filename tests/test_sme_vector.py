"""SME vector side: ``vec`` lines, their checks and errors, routine results against the TOSA
reference model, costs, and memory ordering with the load/store unit."""

import numpy as np
import pytest

import hwsim
from hwsim.errors import TraceSyntaxError
from hwsim.isa import sme
from hwsim.isa.arguments import TensorRef
from hwsim.isa.sme_vector import VecOp, parse_line
from hwsim.errors import Location
from hwsim.targets.sme import layouts
from hwsim.targets.sme.vector import ROUTINES
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.reference import run_graph


def test_a_line_prints_back_to_itself():
    text = ("vec rescale in=mem:0x1000:i32:1x4x4x16 out=mem:0x2000:i8:1x4x4x16 "
            "mult=mem:0x3000:i32:16 shift=mem:0x3040:i8:16 in_zp=0 out_zp=-128 rounding=double")
    op = parse_line(text, Location("t", 1, 1))
    assert str(op) == text
    assert op.args["in"] == TensorRef("mem", 0x1000, "i32", (1, 4, 4, 16))
    assert op.args["out_zp"] == -128
    clamp = parse_line("vec clamp in=mem:0:f32:16 out=mem:64:f32:16 min=0.0 max=inf",
                       Location())
    assert clamp.args["max"] == float("inf") and str(parse_line(str(clamp), Location())) == \
        str(clamp)


@pytest.mark.parametrize("line,column,message", [
    ("vec frobnicate in=mem:0:i8:4", 1, "unknown routine 'frobnicate'"),
    ("vec clamp in=mem:0:i8:4 out=mem:64:i8:4 min=0 max=1 speed=2", 53, "unknown argument"),
    ("vec clamp in=mem:0:i8:4 out=mem:64:i8:4 min=0", 1, "missing argument max"),
    ("vec clamp in=mem:0:q8:4 out=mem:64:i8:4 min=0 max=1", 14, "expected mem:ADDR:DTYPE"),
    ("vec clamp in=mem:0:i8:4 out=mem:64:i8:5 min=0 max=1", 25, "expected shape 4, found 5"),
    ("vec table in=mem:0:i32:4 table=mem:64:i16:513 out=mem:2000:i32:4", 11, "expected dtype"),
    ("vec clamp in=mem:0x7fffff0:i8:64 out=mem:0:i8:64 min=0 max=1", 11, "outside"),
    ("vec add a=mem:0:i32:1x4 b=mem:64:i32:1x3 out=mem:128:i32:1x4", 1, "do not broadcast"),
    ("vec clamp in=mem:0:i8:4 in=mem:0:i8:4", 25, "given twice"),
])
def test_bad_lines_name_the_place_and_what_was_expected(line, column, message):
    m = hwsim.machine("sme", mem_size=1 << 20)
    with pytest.raises(TraceSyntaxError) as err:
        m.run(f"smstart\n{line}\n")
    assert f"<trace>:2:{column}:" in str(err.value) and message in str(err.value)


def test_routines_need_streaming_mode():
    with pytest.raises(hwsim.errors.ProgramError, match="PSTATE.SM"):
        hwsim.machine("sme").run("vec clamp in=mem:0:i8:4 out=mem:64:i8:4 min=0 max=1\n")


def _reference(build, inputs):
    b = GraphBuilder("t")
    out = build(b)
    return run_graph(b.build(out), inputs)[out.name]


def test_rescale_and_clamp_match_the_reference_model():
    rng = np.random.default_rng(1)
    x = rng.integers(-(1 << 20), 1 << 20, (1, 3, 5, 8)).astype(np.int32)
    mult = rng.integers(1 << 29, (1 << 31) - 1, 8).astype(np.int32)
    shift = rng.integers(30, 40, 8).astype(np.int8)
    m = hwsim.machine("sme")
    mem = m.memory("mem")
    for addr, a in ((0x1000, x), (0x2000, mult), (0x2100, shift)):
        mem.write(addr, a)
    m.run("smstart\n"
          "vec rescale in=mem:0x1000:i32:1x3x5x8 out=mem:0x3000:i8:1x3x5x8 "
          "mult=mem:0x2000:i32:8 shift=mem:0x2100:i8:8 out_zp=-3 rounding=double\n"
          "vec clamp in=mem:0x3000:i8:1x3x5x8 out=mem:0x3100:i8:1x3x5x8 min=-100 max=90\n")

    def build(b):
        inp = b.input(x.shape, "int32", "x")
        r = b.op("RESCALE", [inp, b.const(mult, "int32"), b.const(shift, "int8"),
                             b.zero_point(0, "int32"), b.zero_point(-3, "int8")], x.shape, "int8",
                 scale32=True, rounding_mode="DOUBLE_ROUND", per_channel=True,
                 input_unsigned=False, output_unsigned=False)
        return b.clamp(r, -100, 90)
    want = _reference(build, {"x": x})
    assert np.array_equal(mem.read(0x3100, x.size).view(np.int8).reshape(x.shape), want)


def test_float_routines_round_once_per_operation():
    a = np.float32([1.0, 1e-8, 3.0, -2.5])
    b = np.float32([2 ** -24, 1.0, 1 / 3, 7.0])
    m = hwsim.machine("sme")
    m.memory("mem").write(0x1000, a)
    m.memory("mem").write(0x1010, b)
    m.run("smstart\nvec add a=mem:0x1000:f32:4 b=mem:0x1010:f32:4 out=mem:0x1020:f32:4\n"
          "vec mul a=mem:0x1000:f32:4 b=mem:0x1010:f32:4 out=mem:0x1030:bf16:4\n")
    got = m.memory("mem").read(0x1020, 16).view(np.float32)
    exact = a.astype(np.float64) + b.astype(np.float64)
    assert np.array_equal(got, exact.astype(np.float32))          # one rounding of the exact sum
    product = m.memory("mem").read(0x1030, 8).view(np.uint16)
    assert np.array_equal(product, layouts.bf16_bits(a * b))


def test_pack_writes_panels_that_unpack_to_the_im2col_matrix():
    x = np.arange(2 * 5 * 3, dtype=np.float32).reshape(1, 2, 5, 3)
    m = hwsim.machine("sme")
    m.memory("mem").write(0x1000, x)
    count = layouts.panel_elements(10, 27, 16, 2, 2)
    m.run(f"smstart\nvec pack in=mem:0x1000:f32:1x2x5x3 out=mem:0x2000:bf16:{count} "
          "kernel=3,3 pad=1,1,1,1 rows=16 vectors=2 depth=2 fill=-1.0\n")
    flat = layouts.bf16_values(m.memory("mem").read(0x2000, 2 * count).view(np.uint16))
    mat = layouts.unpack_panels(flat, 10, 27, 16, 2, 2)
    xp = np.pad(x[0], ((1, 1), (1, 1), (0, 0)), constant_values=-1)
    want = np.stack([xp[y:y + 3, c:c + 3].reshape(-1) for y in range(2) for c in range(5)])
    assert np.array_equal(mat, want)


def test_cost_is_vectors_times_ops_times_issue_interval_or_the_port_time():
    m = hwsim.machine("sme")
    r = m.run("smstart\nvec rescale in=mem:0x1000:i32:100 out=mem:0x2000:i8:100 "
              "mult=mem:0x3000:i32:1 shift=mem:0x3040:i8:1\n"
              "vec clamp in=mem:0x2000:i8:100 out=mem:0x2000:i8:100 min=0 max=9\n"
              "vec reshape in=mem:0x10000:f32:4096 out=mem:0x20000:f32:64x64\n"
              "vec pack in=mem:0x10000:f32:1x64x1x64 out=mem:0x30000:f32:4096 rows=16 "
              "vectors=2 depth=1\n")
    log = r.log("vec")
    t = m.params
    assert [cycles for _, cycles, _, _ in log] == [
        7 * t.vec_rescale_ops * t.ssve_cycles_per_op,      # 100 int32 lanes: 7 vectors of 16
        2 * t.vec_unary_ops * t.ssve_cycles_per_op,        # 100 int8 lanes: 2 vectors of 64
        256, 256]                  # 16 KB through the store port; the fp32 pack only transposes


def test_loads_after_a_routine_see_its_result_and_it_sees_earlier_stores():
    m = hwsim.machine("sme")
    m.memory("mem").write(0x1000, np.arange(16, dtype=np.float32))
    r = m.run("""smstart
        ptrue p0.s
        mov x0, #0x1000
        mov x1, #0x2000
        ld1w {z0.s}, p0/z, [x0]
        st1w {z0.s}, p0, [x1]
        vec mul a=mem:0x2000:f32:16 b=mem:0x2000:f32:16 out=mem:0x3000:f32:16
        mov x2, #0x3000
        ld1w {z1.s}, p0/z, [x2]
    """)
    assert np.array_equal(m.state.zv[4][1].view(np.float32), np.arange(16) ** 2)
    units = {u: r.log(u) for u in r.unit_names}
    store, load = units["ls"][1], units["ls"][2]
    routine = units["vec"][0]
    assert routine[0] > store[0] and load[0] >= routine[0] + routine[1]


def test_every_routine_has_a_cost_parameter_and_arguments():
    params = hwsim.machine("sme").params.as_dict()
    for routine in ROUTINES.values():
        assert routine.ops is None or callable(routine.ops) or routine.ops in params, routine.name
        assert any(a.kind == "out" for a in routine.args.values()), routine.name


def test_a_python_program_takes_vec_ops():
    m = hwsim.machine("sme")
    m.memory("mem").write(0, np.int8([5, -7, 3, 100]))
    op = VecOp("clamp", {"in": TensorRef("mem", 0, "i8", (4,)),
                         "out": TensorRef("mem", 64, "i8", (4,)), "min": -5, "max": 5})
    m.run([*sme.assemble_program("smstart"), op])
    assert list(m.memory("mem").read(64, 4).view(np.int8)) == [5, -5, 3, 5]
