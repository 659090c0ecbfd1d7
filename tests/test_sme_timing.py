"""SME timing: per-tile dependencies, ZA aliasing, slice writes, ports, costs, parameters."""

import re
from dataclasses import astuple, replace

import pytest
from hypothesis import given, settings, strategies as st

import hwsim
from hwsim.isa import sme
from hwsim.targets.sme.params import PARAMS
from hwsim.targets.sme.semantics import SEMANTICS, VALUE_FIELDS
from tests.profiles import examples
from tests.test_sme_interpreter import instructions

SETUP = "smstart\nptrue p0.b\nptrue p1.h\nptrue p2.s\n"


def starts(result, unit="mx"):
    """Start cycles of the ops on ``unit``, in program order."""
    log = result.log(unit)
    return [start for start, _cycles, _label, _args in log]


def interval(result, chains=1, unit="mx"):
    """Steady-state cycles per op over ``chains`` interleaved dependency chains."""
    s = starts(result, unit)
    return (s[-1] - s[chains - 1]) / (len(s) - chains)


def test_a_chain_on_za0_does_not_stall_za1():
    m = hwsim.machine("sme")
    one = m.run(SETUP + "fmopa za0.s, p2/m, p2/m, z0.s, z1.s\n" * 40)
    two = m.run(SETUP + "fmopa za0.s, p2/m, p2/m, z0.s, z1.s\n"
                        "fmopa za1.s, p2/m, p2/m, z0.s, z1.s\n" * 20)
    assert interval(one) == 4.0 and interval(two, 2) == 2.0


@pytest.mark.parametrize("other,waits", [("za0.s", True), ("za2.s", True), ("za1.s", False),
                                         ("za3.s", False)])
def test_h_tile_waits_for_the_s_tiles_it_overlaps(other, waits):
    m = hwsim.machine("sme")
    r = m.run(SETUP + f"fmopa {other}, p2/m, p2/m, z0.s, z1.s\n"
                      "bfmopa za0.h, p1/m, p1/m, z0.h, z1.h\n")
    first, second = starts(r)
    # fp32 latency is 4; otherwise the next cycle plus one for the datapath switch
    assert second - first == (4 if waits else 1)


def test_slice_loads_overlap_and_the_outer_product_waits_for_all():
    m = hwsim.machine("sme")
    loads = "".join(f"ld1w {{za0h.s[w12, {i % 4}]}}, p2/z, [x0, x1, lsl #2]\n" for i in range(16))
    r = m.run(SETUP + "mov x0, #0x1000\nmov x1, #0\nmov w12, #0\n" + loads
              + "fmopa za0.s, p2/m, p2/m, z0.s, z1.s\n")
    load_starts = starts(r, "ls")
    assert load_starts[-1] - load_starts[0] <= 8           # two load ports: ~2 per cycle
    t = m.timing
    assert starts(r)[0] >= load_starts[-1] + 1 + t.load_latency_cycles


def test_load_bandwidth_is_two_vectors_per_cycle_and_stores_one():
    m = hwsim.machine("sme")
    loads = "".join(f"ld1w {{z{i % 32}.s}}, p2/z, [x0, #{i % 8}, mul vl]\n" for i in range(64))
    stores = "".join(f"st1w {{z{i % 32}.s}}, p2, [x0, #{i % 8}, mul vl]\n" for i in range(64))
    r_load = m.run(SETUP + "mov x0, #0x1000\n" + loads)
    r_store = m.run(SETUP + "mov x0, #0x1000\n" + stores)
    load_bytes = sum(p["bytes"] for n, p in r_load.stats["ports"].items() if n.startswith("load"))
    assert load_bytes == 64 * 64 and r_store.stats["ports"]["store"]["bytes"] == 64 * 64
    assert r_load.stats["ports"]["load0"]["busy"] == r_load.stats["ports"]["load1"]["busy"] == 32
    assert r_store.stats["ports"]["store"]["busy"] == 64


def test_datapath_switch_costs_a_cycle():
    m = hwsim.machine("sme")
    same = m.run(SETUP + "".join(f"fmopa za{t}.s, p2/m, p2/m, z0.s, z1.s\n" for t in range(4))
                 * 10)
    mixed = m.run(SETUP + "fmopa za0.s, p2/m, p2/m, z0.s, z1.s\nsmopa za1.s, p0/m, p0/m, "
                          "z0.b, z1.b\n" * 10)
    assert interval(same, 4) == 1.0
    # per pair: fp32 1 cycle, int8 2 cycles, and a switch cycle before each
    assert interval(mixed, 2) == (1 + 1 + 2 + 1) / 2


def test_smstart_cost_and_parameter_overrides():
    m = hwsim.machine("sme")
    assert m.run("smstart\n").cycles == m.params.smstart_cycles
    slow = m.run(".param fp32_latency_cycles 6\n" + SETUP
                 + "fmopa za0.s, p2/m, p2/m, z0.s, z1.s\n" * 20)
    assert interval(slow) == 6.0


def test_macs_and_utilisation():
    m = hwsim.machine("sme")
    r = m.run(SETUP + "smopa za0.s, p0/m, p0/m, z0.b, z1.b\nsmopa za1.s, p0/m, p0/m, "
                      "z0.b, z1.b\n" * 50)
    assert r.stats["macs"] == 100 * 16 * 16 * 4
    assert interval(r, 2) == 2.0  # 1024 MACs per 2 cycles: twice the fp32 MAC rate


COVERAGE = [SETUP + """
        mov x0, #0x1000
        mov x1, #0
        mov w12, #0
        mov x5, #8
        whilelt p4.s, xzr, x5
        ld1w {z0.s}, p2/z, [x0]
        ld1w {z1.s}, p2/z, [x0, x1, lsl #2]
        fmopa za0.s, p2/m, p2/m, z0.s, z1.s
        fmopa za1.s, p1/m, p1/m, z0.h, z1.h
        bfmopa za2.s, p1/m, p1/m, z0.h, z1.h
        bfmopa za1.h, p1/m, p1/m, z0.h, z1.h
        smopa za3.s, p0/m, p0/m, z0.b, z1.b
        ld1w {za0h.s[w12, 0]}, p2/z, [x0, x1, lsl #2]
        st1w {za0v.s[w12, 1]}, p2, [x0, x1, lsl #2]
        ldr za[w12, 0], [x0]
        str za[w12, 1], [x0, #1, mul vl]
        mov z2.s, p2/m, za0h.s[w12, 0]
        mov za1v.s[w12, 0], p2/m, z2.s
        zero {za0.d}
        st1w {z2.s}, p4, [x0]
        msr fpcr, x1
        mrs x2, fpcr
        sub x0, x0, #16
        movk x0, #1, lsl #16
        smstop
""", """
        .fill mem 0x2100 16 31
        smstart
        vec pack in=mem:0x1000:f32:1x4x4x4 out=mem:0x4000:bf16:4608 kernel=3,3 pad=1,1,1,1 rows=32 vectors=1 depth=1 group=16
        vec slice in=mem:0x1000:i8:1x4x4x4 out=mem:0x4000:i8:1x2x4x4 start=0,0,0,0 size=1,2,4,4
        vec clamp in=mem:0x1000:f32:1x4x4x4 out=mem:0x4000:f32:1x4x4x4 min=0.0 max=6.0
        vec add a=mem:0x1000:i32:1x4x4x4 b=mem:0x1000:i32:1x1x1x4 out=mem:0x4000:i32:1x4x4x4
        vec rescale in=mem:0x1000:i32:1x4x4x4 out=mem:0x4000:i8:1x4x4x4 mult=mem:0x2000:i32:4 shift=mem:0x2100:i8:4
        vec table in=mem:0x1000:i16:16 table=mem:0x1000:i16:513 out=mem:0x4000:i32:16
        vec reduce_sum in=mem:0x1000:f32:1x16 out=mem:0x4000:f32:1x1 axis=1
        vec avg_pool2d in=mem:0x1000:i8:1x4x4x4 out=mem:0x4000:i8:1x1x1x4 kernel=4,4
        vec exp in=mem:0x1000:f32:16 out=mem:0x4000:f32:16
        vec reciprocal in=mem:0x1000:f32:16 out=mem:0x4000:f32:16
"""]


def test_every_parameter_is_read_and_every_row_has_a_source():
    m = hwsim.machine("sme")
    for trace in COVERAGE:
        m.run(trace)
    assert m.params.unread() == []
    for row in PARAMS:
        source = row.source.lower()
        assert re.search(r"sources\.md#|arm arm|assumption: \w+", source), row.name
        if "assumption" in source:
            assert len(source.split("assumption:", 1)[1].split()) >= 4, row.name  # says why


def _timing(machine, ins) -> tuple:
    """What the op table takes from an instruction's recipe: all but its action."""
    return astuple(replace(SEMANTICS[ins.op](machine, ins), act=None))


@settings(max_examples=examples(300), deadline=None)
@given(ins=instructions(), data=st.data())
def test_words_differing_only_in_value_fields_share_their_costs_and_resources(ins, data):
    """The op table costs such words once (``SmeMachine.compile``): whatever the value
    fields hold, a recipe's unit, costs and resources are the same."""
    fields = ins.form.word.fields
    values = dict(ins.fields)
    for name in sorted(VALUE_FIELDS & fields.keys() - ins.form.fixed.keys()):
        lo, hi = fields[name].value_range()
        values[name] = data.draw(st.integers(lo, hi).filter(fields[name].allowed or bool))
    other = sme.decode(ins.form.word.encode(**values))
    m = hwsim.machine("sme")
    m.compile(m.program([]), numerics=True, actions=False)     # the costs recipes read
    if other.form is ins.form:
        assert _timing(m, other) == _timing(m, ins)


def test_a_shared_row_keeps_each_instruction_its_own_label():
    m = hwsim.machine("sme")
    r = m.run(SETUP + "mov x0, #0x100\nmov x0, #0x200\nadd x1, x0, #8\nadd x1, x0, #16\n")
    assert [label for _, _, label, _ in r.log("ctl")][-4:] == [
        "mov x0, #256", "mov x0, #512", "add x1, x0, #8", "add x1, x0, #16"]
