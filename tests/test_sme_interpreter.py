"""The compiled SME interpreter against the Python semantics run in program order.

The reference runs each instruction's ``semantics`` recipe in program order (what any schedule of
an interlocked program gives, see ``semantics``), on a second machine with the same initial state;
the interpreter must leave identical Z, P, ZA, X, FPCR, PSTATE and memory, report the same bytes
per memory instruction, and fail with the same message. Programs: every example trace, random
straight-line programs over every supported form, and predicated and faulting cases.
"""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import hwsim
from hwsim.errors import ProgramError
from hwsim.isa import sme
from hwsim.targets.ieee import host_is_ieee
from hwsim.targets.sme import interpreter, program as sme_program
from hwsim.targets.sme.program import ROUTINE, SmeProgram
from hwsim.targets.sme.semantics import SEMANTICS
from hwsim.targets.sme.state import FPCR
from hwsim.traces.reader import read_trace
from tests.profiles import examples

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "sme"
TRACES = sorted(EXAMPLES.rglob("*.trace"))
STATE = ("z", "p", "za", "x", "control")


def reference(machine, program: SmeProgram, numerics=True) -> np.ndarray:
    """Run ``program`` with the Python semantics in program order (the reference actions the
    simpy engine calls at each op's start: for SME, program order gives the same state); the
    bytes each memory instruction moved (a ``ProgramError`` propagates, as the machine raises
    it). No PSTATE check first: random programs exercise instructions in any mode."""
    table, actions = machine.compile(program, numerics, actions=True)
    for i in range(len(program)):
        commit = actions[i]() if i in actions else None
        if commit is not None:
            commit()
    memory = np.flatnonzero(table.unit == [u.name for u in table.units].index("ls"))
    moved = np.zeros(len(program), np.int64)
    moved[memory] = table.xfer_bytes[table.xfer_ptr[memory]]
    return moved


def interpret(machine, program: SmeProgram, numerics=True) -> np.ndarray:
    moved = np.zeros(len(program), np.int64)
    decoded = interpreter.decode(program.words)
    runner = interpreter.Runner(machine.state, program, decoded, numerics, machine.params, moved)
    assert runner.run(0, len(program)) == len(program)
    return moved


def assert_same_state(a, b):
    for name in STATE:
        assert np.array_equal(getattr(a.state, name), getattr(b.state, name)), name
    assert np.array_equal(a.state.mem.data, b.state.mem.data), "memory"


def twins(**params):
    return hwsim.machine("sme", **params), hwsim.machine("sme", **params)


def both(instructions, machines, numerics=True):
    """Run a program (or a list of instructions) on both machines: (reference moved,
    interpreter moved), or None when both failed with the same message."""
    ref, fast = machines
    program = instructions if isinstance(instructions, SmeProgram) else \
        SmeProgram.from_items(instructions, [ins.loc for ins in instructions])
    try:
        want = reference(ref, program, numerics)
    except ProgramError as exc:
        with pytest.raises(ProgramError) as got:
            interpret(fast, program, numerics)
        assert str(got.value) == str(exc)
        return None
    return want, interpret(fast, program, numerics)


def fault(instructions, machines) -> str:
    """The message both runs fail with."""
    ref, fast = machines
    with pytest.raises(ProgramError) as want:
        reference(ref, SmeProgram.from_items(instructions, [i.loc for i in instructions]))
    assert both(instructions, machines) is None
    return str(want.value)


# -- the examples ------------------------------------------------------------------------------

@pytest.mark.parametrize("trace", TRACES, ids=[t.name for t in TRACES])
@pytest.mark.parametrize("numerics", [True, False])
def test_every_example_trace(trace, numerics):
    parsed = read_trace(trace)
    machines = twins()
    programs = []
    for m in machines:
        for directive in parsed.setup:
            m._setup_action(directive, parsed.base_dir)()
        programs.append(m.parse(parsed.lines))
    want, got = both(programs[0], machines, numerics)
    assert_same_state(*machines)
    assert np.array_equal(want, got)


def test_example_matches_the_simpy_machine():
    simpy_machine, fast = twins()
    simpy_machine.run(EXAMPLES / "gemm_fp32.trace")
    parsed = read_trace(EXAMPLES / "gemm_fp32.trace")
    for directive in parsed.setup:
        fast._setup_action(directive, parsed.base_dir)()
    interpret(fast, fast.parse(parsed.lines))
    assert_same_state(simpy_machine, fast)


# -- random programs over every form -----------------------------------------------------------

FORMS = [form for form in sme.FORMS if form.prints]
MEMORY_OPS = {"ld1_z", "st1_z", "ld1_za", "st1_za", "ldr_za", "str_za"}
MEM_SIZE = 1 << 16
BASES, INDICES = range(8), range(8, 12)   # X0-X7 hold addresses, X8-X11 small indices


@st.composite
def instructions(draw):
    form = draw(st.sampled_from(FORMS))
    values = {}
    for name, field in form.word.fields.items():
        if name in form.fixed:
            continue
        lo, hi = field.value_range()
        numbers = st.integers(lo, hi)
        if form.op in MEMORY_OPS and name in ("rn", "rm"):
            numbers = st.sampled_from(BASES if name == "rn" else INDICES) | numbers
        if field.allowed is not None:
            numbers = numbers.filter(field.allowed)
        values[name] = draw(numbers)
    return sme.decode(form.word.encode(**{**values, **form.fixed}))


def _values(rng, n, fmt, dtype):
    """Normal numbers of a float format (exponent near the bias), as bits."""
    e, m = fmt
    bias = (1 << (e - 1)) - 1
    return ((rng.integers(0, 2, n) << (e + m)) | (rng.integers(bias - 4, bias + 4, n) << m)
            | rng.integers(0, 1 << m, n)).astype(dtype)


def randomise(machines, seed: int):
    """The same random state on both machines: Z registers of random bits, normal FP32, BF16 or
    FP16 numbers, or small integers; random predicates, ZA, memory and FPCR; X0-X7 addresses
    inside memory, X8-X11 small indices, the rest random."""
    rng = np.random.default_rng(seed)
    first = machines[0].state
    n = first.svl_bytes
    z = rng.integers(0, 256, first.z.shape, dtype=np.uint8)
    for r in range(32):
        kind = rng.integers(0, 5)
        if kind == 1:
            z[r] = _values(rng, n // 4, (8, 23), np.uint32).view(np.uint8)
        elif kind in (2, 3):
            z[r] = _values(rng, n // 2, (8, 7) if kind == 2 else (5, 10), np.uint16).view(np.uint8)
        elif kind == 4:
            z[r] = rng.integers(0, 4, n, dtype=np.uint8)
    p = rng.integers(0, 2, first.p.shape).astype(bool) | (rng.random((16, 1)) < 0.5)
    za = rng.integers(0, 256, first.za.shape, dtype=np.uint8)
    za.view(np.uint32)[: n // 2] = _values(rng, n // 2 * n // 4, (8, 23), np.uint32).reshape(
        n // 2, -1)
    x = rng.integers(0, 1 << 63, 32, dtype=np.uint64) << np.uint64(rng.integers(0, 2))
    x[list(BASES)] = rng.integers(8 * n, MEM_SIZE - 8 * n, len(BASES))
    x[list(INDICES)] = rng.integers(0, 16, len(INDICES))
    mem = rng.integers(0, 256, MEM_SIZE, dtype=np.uint8)
    known = FPCR.encode(**{k: (1 << FPCR.fields[k].width) - 1 for k in FPCR.fields})
    fpcr = int(rng.integers(0, 1 << 32)) & known if rng.random() < 0.5 else 0
    for m in machines:
        s = m.state
        s.z[...], s.p[...], s.za[...], s.x[...], s.mem.data[...] = z, p, za, x, mem
        s.fpcr, s.sm, s.za_enabled = fpcr, True, True


def check_random_program(svl, seed, program, numerics):
    machines = twins(svl=svl, mem_size=MEM_SIZE)
    randomise(machines, seed)
    result = both(program, machines, numerics)
    assert_same_state(*machines)
    if result is not None:
        assert np.array_equal(*result)


PROGRAMS = dict(svl=st.sampled_from([128, 256, 512]), seed=st.integers(0, 2 ** 32 - 1),
                program=st.lists(instructions(), min_size=8, max_size=40),
                numerics=st.booleans())


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**PROGRAMS)
def test_random_programs(svl, seed, program, numerics):
    check_random_program(svl, seed, program, numerics)


@pytest.mark.slow
@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**PROGRAMS)
def test_random_programs_thoroughly(svl, seed, program, numerics):
    check_random_program(svl, seed, program, numerics)


# -- predicates, faults, routines, decoding ----------------------------------------------------

def _program(text):
    return sme.assemble_program(text)


def test_predicated_loads_stores_and_outer_products_match():
    machines = twins(svl=512, mem_size=MEM_SIZE)
    randomise(machines, 7)
    program = _program("""
        mov x9, #5
        whilelt p4.s, xzr, x9
        whilelt p5.h, xzr, x9
        ld1w {z1.s}, p4/z, [x0, x8, lsl #2]
        st1w {z1.s}, p4, [x1]
        ld1h {za1v.h[w12, 3]}, p5/z, [x2, x9, lsl #1]
        st1h {za1v.h[w12, 3]}, p5, [x3]
        fmopa za2.s, p4/m, p2/m, z1.s, z3.s
        bfmopa za1.s, p5/m, p5/m, z4.h, z5.h
        smopa za3.s, p4/m, p3/m, z6.b, z7.b
        mov z9.s, p4/m, za2h.s[w13, 1]
        mov za0v.s[w14, 2], p4/m, z9.s
        ldr za[w15, 5], [x4, #5, mul vl]
        str za[w15, 5], [x5, #5, mul vl]
        """)
    want, got = both(program, machines)
    assert_same_state(*machines)
    assert want.tolist() == got.tolist()
    assert got[3] == 20 and got[4] == 20 and got[5] == 10 and got[12] == 64


@pytest.mark.parametrize("line,nbytes", [
    ("ld1w {z0.s}, p0/z, [x0]", 32), ("st1b {z0.b}, p0, [x0, #1, mul vl]", 32),
    ("ld1d {za3h.d[w12, 1]}, p0/z, [x0]", 32), ("str za[w13, 2], [x0, #2, mul vl]", 32)])
def test_faults_raise_the_same_error_after_the_same_instructions(line, nbytes):
    machines = twins(svl=256, mem_size=4096)
    for m in machines:
        m.run("smstart\nptrue p0.b\nptrue p1.d\n")
    lowered = [sme.decode(ins.word) for ins in   # as a lowering makes them: no locations
               _program(f"mov x1, #0x10\nmov x0, #0xff8\n{line}\nmov x2, #1")]
    message = fault(lowered, machines)
    assert message == (f"None: {lowered[2].text}: memory fault in mem: {nbytes} bytes at "
                       f"{0xff8 + nbytes * ('#1' in line) + 2 * 32 * ('#2' in line):#x}: outside "
                       "0x0..0x1000")
    assert_same_state(*machines)
    assert machines[1].state.x[1] == 0x10 and machines[1].state.x[2] == 0


def test_fault_message_names_the_trace_line(tmp_path):
    trace = tmp_path / "bad.trace"
    trace.write_text(".target sme\nsmstart\nptrue p0.s\nmov x0, #0xfffff0\n"
                     "ld1w {z0.s}, p0/z, [x0]\n")
    simpy_machine, fast = twins()
    with pytest.raises(ProgramError) as want:
        simpy_machine.run(trace)
    program = fast.parse(read_trace(trace).lines)
    with pytest.raises(ProgramError) as got:
        interpret(fast, program)
    assert str(got.value) == str(want.value)
    assert str(got.value).startswith(f"{trace}:5:")


def test_inactive_elements_never_fault_and_move_nothing():
    machines = twins(svl=512, mem_size=4096)
    program = _program(
        "smstart\nwhilelt p1.s, xzr, xzr\nmov x0, #0xffc\nld1w {z0.s}, p1/z, [x0]\n"
        "st1w {z0.s}, p1, [x0]\nmov x3, #2\nwhilelt p2.s, xzr, x3\nld1w {z1.s}, p2/z, [x0]")
    assert "8 bytes at 0xffc" in fault(program, machines)   # two active elements: 8 bytes
    assert machines[1].state.x[3] == 2 and not machines[1].state.z[0].any()
    assert_same_state(*machines)


def test_run_stops_at_a_vector_routine_and_resumes():
    m = hwsim.machine("sme", svl=512)
    words = [sme.assemble(t) for t in ("smstart", "mov x0, #1")] + [ROUTINE] + [
        sme.assemble("mov x1, #2")]
    program = SmeProgram(np.array(words, np.uint32))
    decoded = interpreter.decode(program.words)
    assert decoded.column("kind").tolist() == [interpreter.KIND[k] for k in (
        "smstart", "movw", "routine", "movw")]
    moved = np.zeros(4, np.int64)
    runner = interpreter.Runner(m.state, program, decoded, True, m.params, moved)
    assert runner.run(0, 4) == 2
    assert m.state.x[0] == 1 and m.state.x[1] == 0
    assert runner.run(3, 4) == 4
    assert m.state.x[1] == 2


def test_decode_rows_each_distinct_word_once_and_rejects_unknown_words():
    words = np.array([sme.assemble("add x0, x0, #4")] * 5 + [sme.assemble("zero {za}")],
                     np.uint32)
    decoded = interpreter.decode(words)
    assert decoded.table.shape == (2, len(interpreter.COLUMNS))
    assert decoded.column("imm").tolist() == [4] * 5 + [0]
    assert decoded.column("mask").tolist() == [0] * 5 + [0xFF]
    assert [ins.text for ins in decoded.instructions] == ["add x0, x0, #4", "zero {za}"]
    with pytest.raises(ProgramError, match=r"^instruction 1 \(0x12345678\): "):
        interpreter.decode(np.array([words[0], 0x12345678], np.uint32))


def test_decoded_columns_say_what_each_instruction_needs():
    program = _program("fmopa za0.s, p0/m, p0/m, z0.s, z1.s\nbfmopa za0.h, p0/m, p0/m, z0.h, "
                       "z1.h\nzero {za}\nld1w {z0.s}, p0/z, [x0]\nadd x0, x0, #1")
    decoded = interpreter.decode([ins.word for ins in program])
    sm, za, b16 = interpreter.NEEDS_SM, interpreter.NEEDS_ZA, interpreter.NEEDS_B16B16
    assert decoded.column("needs").tolist() == [sm | za, sm | za | b16, za, sm, 0]
    dtypes = [interpreter.DTYPES[d] for d in decoded.column("dtype")[:2]]
    assert dtypes == ["fp32", "bf16"]


def test_builder_programs_run_the_same_as_instruction_lists():
    text = "smstart\nptrue p0.s\nmov x0, #0x100\nld1w {z0.s}, p0/z, [x0]\nfmopa za0.s, p0/m, " \
           "p0/m, z0.s, z0.s\nst1w {za0h.s[w12, 0]}, p0, [x1, x8, lsl #2]"
    builder = sme_program.Builder()
    builder.words([ins.word for ins in _program(text)])
    a, b = twins(svl=512, mem_size=MEM_SIZE)
    randomise((a, b), 3)
    interpret(a, builder.program())
    reference(b, SmeProgram.from_items(_program(text)))
    assert_same_state(a, b)


def test_the_host_keeps_denormals_as_the_fast_paths_assume():
    assert host_is_ieee()


def test_every_semantics_kind_has_an_interpreter_kind():
    assert set(interpreter.KINDS) == set(SEMANTICS) | {"routine"}
    assert interpreter.KINDS[interpreter.KIND["ld1_z"]:interpreter.KIND["str_za"] + 1] == (
        "ld1_z", "st1_z", "ld1_za", "st1_za", "ldr_za", "str_za")   # ``execute`` relies on it
