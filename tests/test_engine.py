"""The shared timing engine: ordering, dependencies, ports, decoupled units, determinism."""

import pytest

from hwsim.memory import AddressSpace, Copy, Dma
from hwsim.timing import Engine, Op, Work
from hwsim.timing.stats import binned, collect


def op(unit, cycles, latency=0, reads=(), writes=(), transfers=(), log=None, name="op",
       commit=None, macs=0):
    def execute():
        if log is not None:
            log.append((name, unit.engine.env.now))
        return Work(cycles, latency, transfers, macs, commit)
    return Op(unit, execute, name, reads, writes)


def test_program_order_and_occupancy():
    e = Engine(1e9)
    u = e.unit("u", queue_depth=4)
    log = []
    cycles = e.run([op(u, 3, log=log, name=str(i)) for i in range(5)])
    assert cycles == 15
    assert [t for _, t in log] == [0, 3, 6, 9, 12]
    assert u.busy == 15 and u.ops == 5


def test_raw_dependency_waits_for_latency_and_records_stall():
    e = Engine(1e9)
    a, b = e.unit("a"), e.unit("b")
    log = []
    e.run([op(a, 2, latency=5, writes=("r",), log=log, name="p"),
           op(b, 1, reads=("r",), log=log, name="c")])
    assert dict(log) == {"p": 0, "c": 7}
    assert b.stalls == {"wait r": 7}


def test_independent_resources_do_not_serialise():
    # a pipelined unit: one op per cycle, latency 4; two chains on two tiles interleave
    e = Engine(1e9)
    u = e.unit("mx", queue_depth=8)
    ops = []
    for i in range(8):
        tile = f"za{i % 2}"
        ops.append(op(u, 1, latency=3, reads=(tile,), writes=(tile,)))
    one_chain = Engine(1e9)
    v = one_chain.unit("mx", queue_depth=8)
    chain = [op(v, 1, latency=3, reads=("za0",), writes=("za0",)) for _ in range(8)]
    assert e.run(ops) < one_chain.run(chain)


def test_war_writer_waits_for_earlier_reader_to_start():
    e = Engine(1e9)
    slow, fast = e.unit("slow"), e.unit("fast")
    log = []
    e.run([op(slow, 10, log=log, name="busy"),
           op(slow, 1, reads=("x",), log=log, name="reader"),
           op(fast, 1, writes=("x",), log=log, name="writer")])
    assert dict(log)["writer"] >= dict(log)["reader"]


def test_commit_happens_at_ready_time_before_same_cycle_starts():
    e = Engine(1e9)
    a, b = e.unit("a"), e.unit("b")
    box = {"v": 0}
    seen = []
    # b's reader starts exactly when a's result is ready: it must see the new value
    e.run([op(a, 1, latency=4, writes=("r",), commit=lambda: box.update(v=1)),
           op(b, 5, name="pad"),
           Op(b, lambda: (seen.append(box["v"]), Work(1))[1], "reader")])
    assert seen == [1]


@pytest.mark.parametrize("commit", [None, lambda: None])
def test_the_run_ends_when_the_last_result_lands(commit):
    # with or without a commit (a timing-only run has none): the same cycle count
    e = Engine(1e9)
    assert e.run([op(e.unit("a"), 2, latency=5, commit=commit)]) == 7


def test_port_is_a_shared_pipe():
    e = Engine(1e9)
    p = e.port("mem", width_bytes=8, latency_cycles=10)
    a, b = e.unit("a"), e.unit("b")
    log = []
    e.run([op(a, 1, transfers=((p, 64),), log=log, name="x", writes=("x",)),
           op(b, 1, transfers=((p, 64),), log=log, name="y", writes=("y",))])
    # both start at 0; the second waits for the pipe: 8 cycles each
    assert a.busy == 1 and a.stalls == {"port mem": 7}
    assert b.stalls == {"port mem": 15}
    assert p.bytes == 128 and p.busy_cycles == 16


def test_dma_is_decoupled_and_functional_effect_is_at_completion():
    e = Engine(1e9)
    src, dst = AddressSpace("l2", 1024), AddressSpace("l1", 1024)
    src.write(0, bytes(range(64)))
    ports = {"l2": e.port("l2", 8, 10), "l1": e.port("l1", 32, 1)}
    dma = Dma(e, "dma", ports, channels=2, setup_cycles=2)
    core = e.unit("core")
    early, late = [], []
    ops = [dma.op(Copy(src, 0, dst, 0, 64), token="t0"),
           Op(core, lambda: (early.append(dst.read(0, 4).tolist()), Work(1))[1], "peek"),
           Op(core, lambda: (late.append(dst.read(0, 4).tolist()), Work(1))[1], "after wait",
              reads=("t0",))]
    cycles = e.run(ops)
    assert early == [[0, 0, 0, 0]]       # did not wait: stale bytes
    assert late == [[0, 1, 2, 3]]        # waited on the transfer token
    assert cycles == 8 + 10 + 1          # 64 B at 8 B/cycle, latency 10, then the reader


def test_dma_2d_strided_copy():
    e = Engine(1e9)
    src, dst = AddressSpace("a", 256), AddressSpace("b", 256)
    src.write(0, bytes(range(256)))
    dma = Dma(e, "dma", {"a": e.port("a", 4), "b": e.port("b", 4)}, channels=1, setup_cycles=1)
    e.run([dma.op(Copy(src, 0, dst, 0, row_bytes=4, rows=3, src_stride=16, dst_stride=4))])
    assert dst.read(0, 12).tolist() == [0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35]


def test_dma_channels_limit_transfers_in_flight():
    def run(channels):
        e = Engine(1e9)
        a, b = AddressSpace("a", 4096), AddressSpace("b", 4096)
        dma = Dma(e, "dma", {"a": e.port("a", 64, 100), "b": e.port("b", 64)}, channels, 1)
        return e.run([dma.op(Copy(a, 0, b, 0, 64)) for _ in range(4)])
    assert run(1) > run(4)


def test_deterministic_statistics():
    def once():
        e = Engine(1e9)
        p = e.port("m", 16, 3)
        u, v = e.unit("u", 4, peak_macs=8), e.unit("v", 4)
        ops = []
        for i in range(50):
            ops.append(op(u, 2, 1, reads=(i % 3,), writes=(i % 3,), transfers=((p, 40),), macs=8))
            ops.append(op(v, 1, 0, reads=(i % 3,), transfers=((p, 24),)))
        e.run(ops)
        return collect(e, "test", 100, 8.0, 16).to_json()
    assert once() == once()
    stats = once()
    assert stats["macs"] == 400
    u = stats["units"]["u"]
    assert u["busy"] + u["stalled"] + u["idle"] == stats["cycles"]


def test_binned_spreads_amounts_and_conserves_total():
    sums, width = binned([(0, 10, 100), (5, 5, 50)], 20, 4)
    assert width == 5
    assert sums.tolist() == pytest.approx([50, 100, 0, 0])


def test_partial_writes_overlap_and_the_next_reader_waits_for_all():
    e = Engine(1e9)
    ls, mx = e.unit("ls", queue_depth=8), e.unit("mx", queue_depth=8)
    log = []

    def part(name):
        def execute():
            log.append((name, e.env.now))
            return Work(1, 9)
        return Op(ls, execute, name, parts=("tile",))
    ops = [part(f"row{i}") for i in range(4)]
    ops.append(op(mx, 1, reads=("tile",), log=log, name="reader"))
    ops.append(op(mx, 1, writes=("tile",), log=log, name="writer"))
    e.run(ops)
    times = dict(log)
    assert [times[f"row{i}"] for i in range(4)] == [0, 1, 2, 3]   # pipelined, not serialised
    assert times["reader"] == 3 + 1 + 9                             # after the last row is ready
    assert times["writer"] >= times["reader"]


def test_partial_write_waits_for_the_full_writer_and_earlier_readers():
    e = Engine(1e9)
    a, b = e.unit("a"), e.unit("b")
    log = []
    e.run([op(a, 2, latency=3, writes=("t",), log=log, name="full"),
           op(a, 10, reads=("t",), log=log, name="reader"),
           Op(b, lambda: (log.append(("part", e.env.now)), Work(1))[1], "part", parts=("t",))])
    times = dict(log)
    assert times["part"] >= times["reader"] >= 5


def test_started_readers_are_pruned():
    e = Engine(1e9)
    u = e.unit("u", queue_depth=4)
    e.run([op(u, 1, reads=("p0",)) for _ in range(1000)])
    assert len(e._tracks["p0"].readers) < 100
def test_analytic_stalls_extend_the_op_and_are_reported():
    e = Engine(1e9)
    u = e.unit("u", queue_depth=4)
    log = []

    def execute():
        log.append(e.env.now)
        return Work(3, stalls={"bank conflict": 2})
    e.run([Op(u, execute, "a"), op(u, 1, log=log, name="b")])
    assert log == [0, ("b", 5)]               # the second op starts after 3 + 2 cycles
    assert u.busy == 4 and u.stalls == {"bank conflict": 2}


def test_waiting_for_a_dependency_that_has_not_started_is_a_stall():
    e = Engine(1e9)
    a, b, c = e.unit("a"), e.unit("b"), e.unit("c")
    e.run([op(a, 10, name="busy"),
           op(a, 1, latency=2, writes=("r",), name="producer"),   # starts at 10
           op(b, 1, reads=("r",), name="consumer")])
    assert b.stalls == {"wait r": 13}
    assert c.stalls == {}


def test_lazy_commits_land_by_their_ready_time_and_extend_the_run():
    import gc
    e = Engine(1e9)
    a = e.unit("a")
    box = {"v": 0}
    seen = []
    e.at(6, lambda: seen.append(box["v"]))  # an action at the ready cycle sees the result
    cycles = e.run([op(a, 1, latency=5, commit=lambda: box.update(v=1))])
    assert cycles == 6 and box["v"] == 1 and seen == [1]
    assert gc.isenabled()  # paused only while running


def test_many_started_readers_do_not_hide_a_pending_one():
    e = Engine(1e9)
    fast, slow, w = e.unit("fast", 128), e.unit("slow"), e.unit("w")
    log = []
    ops = [op(fast, 1, reads=("x",)) for _ in range(100)]
    ops += [op(slow, 50, name="busy"), op(slow, 1, reads=("x",), log=log, name="late reader"),
            op(w, 1, writes=("x",), log=log, name="writer")]
    e.run(ops)
    assert dict(log)["writer"] >= dict(log)["late reader"] == 50
