"""The timing engines: ordering, dependencies, ports, decoupled units, contention, effects at
simulated time; every case runs on both engines, which must agree record for record."""

import gc
from pathlib import Path

import numpy as np
import pytest

import hwsim
from hwsim.errors import ConfigError
from hwsim.memory import AddressSpace, Copy, Dma
from hwsim.timing import core
from hwsim.timing import engine as reference
from hwsim.timing.effects import Effects, replay
from hwsim.timing.optable import (DEP_PART, DEP_READ, Chunk, OpBuilder, PortSpec,
                                  UnitSpec, entries_of)
from hwsim.timing.stats import binned, collect


class Prog:
    """A test program: units and ports by name, ops appended with ``op``; ``run`` runs it on
    both engines, checks they agree and returns (records, start cycle of each named op)."""

    def __init__(self, units, ports=(), groups=(), banks=0):
        self.b = OpBuilder([u if isinstance(u, UnitSpec) else UnitSpec(u) for u in units],
                           [PortSpec(*p) for p in ports], groups, traffic_banks=banks)
        self.actions: dict = {}
        self.names: dict = {}
        self.seen: list = []

    def port(self, name):
        return self.b.port(name)

    def op(self, unit, cycles, latency=0, name=None, commit=None, action=None, **kw):
        i = self.b.add(unit, cycles, latency, label=name or "", **kw)
        if name:
            self.names[name] = i
        if commit is not None or action is not None:
            def act(i=i):
                self.seen.append(i)
                if action is not None:
                    action()
                return commit
            self.actions[i] = act
        return i

    def run(self):
        table = self.b.table()
        a = reference.simulate(table, Effects(self.actions))
        order = list(self.seen)
        self.seen.clear()
        b = core.simulate(table)
        replay(b, Effects(self.actions))
        assert a.differences(b) == []
        assert order == self.seen
        return a, {n: int(a.start[i]) for n, i in self.names.items()}


def stalls(records, unit):
    return records.unit_stalls([u.name for u in records.table.units].index(unit))


def test_program_order_and_occupancy():
    p = Prog([UnitSpec("u", 4)])
    for i in range(5):
        p.op("u", 3, name=str(i))
    rec, start = p.run()
    assert rec.cycles == 15
    assert [start[str(i)] for i in range(5)] == [0, 3, 6, 9, 12]
    assert rec.busy.tolist() == [15] and rec.ops.tolist() == [5]


def test_raw_dependency_waits_for_latency_and_records_stall():
    p = Prog(["a", "b"])
    p.op("a", 2, latency=5, writes=("r",), name="p")
    p.op("b", 1, reads=("r",), name="c")
    rec, start = p.run()
    assert start == {"p": 0, "c": 7}
    assert stalls(rec, "b") == {"wait r": 7}


def test_independent_resources_do_not_serialise():
    # a pipelined unit: one op per cycle, latency 4; two chains on two tiles interleave
    def cycles(tiles):
        p = Prog([UnitSpec("mx", 8)])
        for i in range(8):
            tile = ("za", i % tiles)
            p.op("mx", 1, latency=3, reads=(tile,), writes=(tile,))
        return p.run()[0].cycles
    assert cycles(2) < cycles(1)


def test_war_writer_waits_for_earlier_reader_to_start():
    p = Prog(["slow", "fast"])
    p.op("slow", 10, name="busy")
    p.op("slow", 1, reads=("x",), name="reader")
    p.op("fast", 1, writes=("x",), name="writer")
    _, start = p.run()
    assert start["writer"] == start["reader"] == 10


def test_commit_happens_at_ready_time_before_same_cycle_starts():
    box, seen = {"v": 0}, []
    p = Prog(["a", "b"])
    p.op("a", 1, latency=4, writes=("r",), commit=lambda: box.update(v=1))
    p.op("b", 5, name="pad")
    # b's reader starts exactly when a's result is ready: it must see the new value
    p.op("b", 1, action=lambda: seen.append(box["v"]), commit=None)
    p.run()
    assert seen == [1, 1]          # once per engine


@pytest.mark.parametrize("commit", [None, lambda: None])
def test_the_run_ends_when_the_last_result_lands(commit):
    # with or without a commit (a timing-only run has none): the same cycle count
    p = Prog(["a"])
    p.op("a", 2, latency=5, commit=commit)
    assert p.run()[0].cycles == 7


def test_port_is_a_shared_pipe():
    p = Prog(["a", "b"], [("mem", 8, 10)])
    mem = p.port("mem")
    p.op("a", 1, transfers=((mem, 64),), writes=("x",))
    p.op("b", 1, transfers=((mem, 64),), writes=("y",))
    rec, _ = p.run()
    # both start at 0; the second waits for the pipe: 8 cycles each
    assert rec.busy.tolist() == [1, 1]
    assert stalls(rec, "a") == {"port mem": 7} and stalls(rec, "b") == {"port mem": 15}
    assert rec.port_log(0)[:, 2].sum() == 128 and rec.slot_cycles.sum() == 16


def test_same_cycle_starts_reserve_ports_in_program_order():
    p = Prog(["a", "b"], [("mem", 8, 0)])
    mem = p.port("mem")
    p.op("b", 3, name="pad")
    p.op("a", 3, name="pad2")
    p.op("b", 0, transfers=((mem, 8),), name="early in program")   # both start at cycle 3
    p.op("a", 0, transfers=((mem, 8),), name="later")
    rec, start = p.run()
    assert start["early in program"] == start["later"] == 3
    assert rec.slot_start.tolist() == [3, 4]


def test_a_port_group_sends_each_transfer_to_the_port_that_frees_first():
    p = Prog([UnitSpec("ls", 8, in_flight=8)], [("load0", 8, 0), ("load1", 8, 0)],
             groups=[(0, 1)])
    for _ in range(4):
        p.op("ls", 1, transfers=((-1, 64),))
    rec, _ = p.run()
    assert rec.slot_port.tolist() == [0, 1, 0, 1]


def test_dma_is_decoupled_and_functional_effect_is_at_completion():
    src, dst = AddressSpace("l2", 1024), AddressSpace("l1", 1024)
    early, late = [], []
    p = Prog([UnitSpec("dma", 16, in_flight=2), "core"], [("l2", 8, 10), ("l1", 32, 1)])
    dma = Dma("dma", {"l2": p.port("l2"), "l1": p.port("l1")}, setup_cycles=2)
    dma.add(p.b, Copy(src, 0, dst, 0, 64), "t0", 0, p.actions)
    p.op("core", 1, action=lambda: early.append(dst.read(0, 4).tolist()))
    p.op("core", 1, reads=("t0",), action=lambda: late.append(dst.read(0, 4).tolist()))
    src.write(0, bytes(range(64)))
    table = p.b.table()
    rec = reference.simulate(table, Effects(p.actions))
    assert early == [[0, 0, 0, 0]]       # did not wait: stale bytes
    assert late == [[0, 1, 2, 3]]        # waited on the transfer token
    assert rec.cycles == 8 + 10 + 1      # 64 B at 8 B/cycle, latency 10, then the reader
    dst.fill(0, 64, 0)
    fast = core.simulate(table)
    replay(fast, Effects(p.actions))
    assert early[1] == [0, 0, 0, 0] and late[1] == [0, 1, 2, 3] and rec.differences(fast) == []


def test_dma_2d_strided_copy():
    src, dst = AddressSpace("a", 256), AddressSpace("b", 256)
    src.write(0, bytes(range(256)))
    p = Prog([UnitSpec("dma", 16, in_flight=1)], [("a", 4), ("b", 4)])
    dma = Dma("dma", {"a": 0, "b": 1}, setup_cycles=1)
    dma.add(p.b, Copy(src, 0, dst, 0, row_bytes=4, rows=3, src_stride=16, dst_stride=4), "t",
            0, p.actions)
    p.run()
    assert dst.read(0, 12).tolist() == [0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35]


def test_dma_channels_limit_transfers_in_flight():
    def run(channels):
        a, b = AddressSpace("a", 4096), AddressSpace("b", 4096)
        p = Prog([UnitSpec("dma", 16, in_flight=channels)], [("a", 64, 100), ("b", 64)])
        dma = Dma("dma", {"a": 0, "b": 1}, 1)
        for n in range(4):
            dma.add(p.b, Copy(a, 0, b, 0, 64), ("t", n), n, None)
        return p.run()[0]
    assert run(1).cycles > run(4).cycles
    assert stalls(run(1), "dma") == {"transfers in flight": 300}   # 3 x the 100-cycle latency


def test_deterministic_statistics():
    def once():
        p = Prog([UnitSpec("u", 4, peak_macs=8), UnitSpec("v", 4)], [("m", 16, 3)])
        for i in range(50):
            p.op("u", 2, 1, reads=(("r", i % 3),), writes=(("r", i % 3),),
                 transfers=((0, 40),), macs=8)
            p.op("v", 1, 0, reads=(("r", i % 3),), transfers=((0, 24),))
        return collect(p.run()[0], "test", 100, 8.0, 1e9, 16).to_json()
    assert once() == once()
    stats = once()
    assert stats["macs"] == 400 and stats["cycles"] == 253
    u = stats["units"]["u"]
    assert u["busy"] + u["stalled"] + u["idle"] == stats["cycles"]


def test_binned_spreads_amounts_and_conserves_total():
    sums, width = binned([(0, 10, 100), (5, 5, 50)], 20, 4)
    assert width == 5
    assert sums.tolist() == pytest.approx([50, 100, 0, 0])


@pytest.mark.parametrize("seed", range(5))
def test_binned_equals_the_amounts_spread_cycle_by_cycle(seed):
    rng = np.random.default_rng(seed)
    log = np.stack([rng.integers(0, 300, 50), rng.integers(0, 40, 50),
                    rng.integers(0, 1000, 50)], axis=1)
    per_cycle = np.zeros(400)
    for start, cycles, amount in log:
        per_cycle[start:start + max(cycles, 1)] += amount / max(cycles, 1)
    for bins in (1, 7, 64, 400):
        sums, width = binned(log, 310, bins)
        want = np.add.reduceat(per_cycle[:len(sums) * width], np.arange(0, len(sums) * width,
                                                                          width))
        assert sums == pytest.approx(want, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_binned_finds_windows_as_the_float_floor_does(seed):
    """``binned`` finds a start's window by integer division; the float floor division it
    replaced gives the same windows, so the same sums bit for bit (here up to 2^40 cycles)."""
    rng = np.random.default_rng(seed)
    total = 1 << 40
    log = np.stack([rng.integers(0, total, 2000), rng.integers(0, 1 << 20, 2000),
                    rng.integers(0, 1 << 30, 2000)], axis=1)
    for bins in (1, 999, 1 << 16):
        sums, width = binned(log, total, bins)
        want = np.zeros(len(sums))
        for start, cycles, amount in log.tolist():
            s, c = float(start), max(float(cycles), 1.0)
            e, rate, b = s + c, float(amount) / c, max(int(s // width), 0)
            while b < len(want) and b * width < e:
                lo, hi = max(s, b * width), min(e, (b + 1) * width)
                if hi > lo:
                    want[b] += rate * (hi - lo)
                b += 1
        assert sums.tobytes() == want.tobytes()


def test_partial_writes_overlap_and_the_next_reader_waits_for_all():
    p = Prog([UnitSpec("ls", 8), UnitSpec("mx", 8)])
    for i in range(4):
        p.op("ls", 1, 9, parts=("tile",), name=f"row{i}")
    p.op("mx", 1, reads=("tile",), name="reader")
    p.op("mx", 1, writes=("tile",), name="writer")
    _, start = p.run()
    assert [start[f"row{i}"] for i in range(4)] == [0, 1, 2, 3]   # pipelined, not serialised
    assert start["reader"] == 3 + 1 + 9                             # after the last row is ready
    assert start["writer"] >= start["reader"]


def test_partial_write_waits_for_the_full_writer_and_earlier_readers():
    p = Prog(["a", "b"])
    p.op("a", 2, latency=3, writes=("t",), name="full")
    p.op("a", 10, reads=("t",), name="reader")
    p.op("b", 1, parts=("t",), name="part")
    _, start = p.run()
    assert start["part"] == start["reader"] == 5


def test_more_edges_than_the_first_pass_has_room_for():
    """Each reader after many partial writes waits for all of them: more than two edges per
    scoreboard entry, so the edges take a second pass (``core.edges``)."""
    p = Prog(["a", "b", "c"])
    for i in range(6):
        p.op("abc"[i % 3], 1, 2, parts=("t",))
    for i in range(6):
        p.op("abc"[i % 3], 1, reads=("t",), name=f"reader{i}")
    p.op("a", 1, writes=("t",), name="writer")
    table = p.b.table()
    ptr, dep, _, _ = core.edges(len(table), table.unit.astype(np.int64), 3, table.dep_ptr,
                                table.dep_res.astype(np.int64), table.dep_mode,
                                table.res_kind.astype(np.int64), len(table.res_kind))
    assert len(dep) == ptr[-1] == 6 * 6 + 6 + 3 > 2 * len(table.dep_res) + 1
    _, start = p.run()
    assert min(start[f"reader{i}"] for i in range(6)) == 2 + 2     # the last part is ready
    assert start["writer"] >= max(start[f"reader{i}"] for i in range(6))


def test_analytic_stalls_extend_the_op_and_are_reported():
    p = Prog([UnitSpec("u", 4)])
    p.op("u", 3, stall=("bank conflict", 2), name="a")
    p.op("u", 1, name="b")
    rec, start = p.run()
    assert start == {"a": 0, "b": 5}          # the second op starts after 3 + 2 cycles
    assert rec.busy.tolist() == [4] and stalls(rec, "u") == {"bank conflict": 2}


def test_waiting_for_a_dependency_that_has_not_started_is_a_stall():
    p = Prog(["a", "b", "c"])
    p.op("a", 10, name="busy")
    p.op("a", 1, latency=2, writes=("r",), name="producer")   # starts at 10
    p.op("b", 1, reads=("r",), name="consumer")
    rec, _ = p.run()
    assert stalls(rec, "b") == {"wait r": 13} and stalls(rec, "c") == {}


def test_many_started_readers_do_not_hide_a_pending_one():
    p = Prog([UnitSpec("fast", 128), "slow", "w"])
    for _ in range(100):
        p.op("fast", 1, reads=("x",))
    p.op("slow", 50, name="busy")
    p.op("slow", 1, reads=("x",), name="late reader")
    p.op("w", 1, writes=("x",), name="writer")
    _, start = p.run()
    assert start["late reader"] == 50 and start["writer"] == 99   # after every reader started


def test_the_front_end_waits_for_a_full_queue_to_drain_to_half():
    p = Prog([UnitSpec("slow", 4), UnitSpec("other", 4)])
    for _ in range(6):
        p.op("slow", 10)
    p.op("other", 1, name="behind the full queue")
    _, start = p.run()
    # slow takes op 0 at 0; ops 1-4 fill its queue; op 5 waits until two are taken (cycle 10
    # and 20: the queue is back to 2 when op 2 is taken at 20), and so does the next op
    assert start["behind the full queue"] == 20


def test_contention_is_paid_by_the_op_that_starts_later():
    p = Prog(["dma", "ne16"], [("l2", 8, 0), ("l1", 32, 0)], banks=16)
    p.op("dma", 1, transfers=((0, 640), (1, 640)),
         traffic=("record", "dma", 160.0, 8.0), name="transfer")
    p.op("ne16", 100, traffic=("pay", "ne16", {4.0: 100}), name="streamer")
    rec, _ = p.run()
    # the DMA moves 2 words a cycle over its 80-cycle slot: 80% of the window at 2 words;
    # each of the 100 accesses of 4 words conflicts with probability 4 * 1.6 / 16
    assert stalls(rec, "ne16") == {"l1 contention": 40}
    assert stalls(rec, "dma") == {"port l2": 79}


def test_the_collector_is_paused_only_while_running():
    p = Prog(["a"])
    p.op("a", 1)
    p.run()
    assert gc.isenabled()


def _random_program(seed):
    rng = np.random.default_rng(seed)
    units = [UnitSpec(f"u{k}", int(rng.integers(1, 6)),
                      in_flight=int(rng.integers(1, 4)) if k == 3 else 0) for k in range(4)]
    p = Prog(units, [("p0", 8, 3), ("p1", 4, 0), ("p2", 16, 7)], groups=[(0, 2)], banks=8)
    for i in range(int(rng.integers(20, 200))):
        res = [(f"r{k % 3}", int(k)) for k in rng.integers(0, 6, size=rng.integers(0, 4))]
        modes = rng.integers(0, 3, size=len(res))
        transfers = [(int(rng.integers(-1, 3)), int(rng.integers(0, 200)))
                     for _ in range(rng.integers(0, 3))]
        traffic = None
        if rng.random() < 0.3:
            traffic = ("pay", "m%d" % rng.integers(0, 2), {2.0: int(rng.integers(1, 50))})
        elif transfers and transfers[0][0] >= 0 and rng.random() < 0.3:
            traffic = ("record", "dma", float(rng.integers(1, 40)), 4.0)
        p.op(f"u{rng.integers(0, 4)}", int(rng.integers(0, 6)), int(rng.integers(0, 8)),
             reads=[r for r, m in zip(res, modes) if m == 0],
             parts=[r for r, m in zip(res, modes) if m == 1],
             writes=[r for r, m in zip(res, modes) if m == 2], transfers=transfers,
             stall=("static", int(rng.integers(0, 3))), traffic=traffic,
             macs=int(rng.integers(0, 4)), commit=(lambda: None) if rng.random() < 0.3 else None)
    return p


@pytest.mark.parametrize("seed", range(40))
def test_both_engines_agree_on_random_programs(seed):
    _random_program(seed).run()


def test_a_machine_remembers_its_engine():
    m = hwsim.machine("hmx", engine="simpy")
    assert m.engine == "simpy"
    trace = Path(__file__).parents[1] / "examples" / "hmx" / "basic_multiply.trace"
    assert m.run(trace).cycles == hwsim.machine("hmx").run(trace).cycles == 72
    with pytest.raises(ConfigError, match="engine 'fast': expected one of compiled, simpy"):
        hwsim.machine("sme", engine="fast")


def _edges_by_rule(table) -> list:
    """Each op's dependency edges from the scoreboard rules, in Python: per scoreboard entry a
    run of (op it waits for, RAW, the resource's kind) edges, in no particular order."""
    writer, parts, readers, out = {}, {}, {}, []
    for i in range(len(table)):
        runs = []
        for d in range(table.dep_ptr[i], table.dep_ptr[i + 1]):
            r, mode = int(table.dep_res[d]), int(table.dep_mode[d])
            deps = [(writer[r], True)] if writer.get(r, i) != i else []
            if mode != DEP_PART:
                deps += [(op, True) for op in parts.get(r, []) if op != i]
            if mode != DEP_READ:
                deps += [(op, False) for op in readers.get(r, {}).values() if op != i]
            if deps:
                runs.append(sorted((op, raw, int(table.res_kind[r])) for op, raw in deps))
            if mode == DEP_READ:
                readers.setdefault(r, {})[int(table.unit[i])] = i
            elif mode == DEP_PART:
                parts.setdefault(r, []).append(i)
            else:
                writer[r], parts[r], readers[r] = i, [], {}
        out.append(runs)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_edges_follow_the_scoreboard_rules(seed):
    """``core.edges``: every scoreboard entry's edges are one run, its first edge marked
    NEW_RUN, each edge with the resource's kind as its stall reason."""
    table = _random_program(seed).b.table()
    ptr, dep, flags, reason = core.edges(
        len(table), table.unit.astype(np.int64), len(table.units), table.dep_ptr,
        table.dep_res.astype(np.int32), table.dep_mode, table.res_kind.astype(np.int32),
        max(len(table.res_kind), 1))
    for i, want in enumerate(_edges_by_rule(table)):
        edges = range(ptr[i], ptr[i + 1])
        starts = [k for k in edges if flags[k] & core.NEW_RUN] + [ptr[i + 1]]
        found = [sorted((int(dep[k]), bool(flags[k] & core.RAW), int(reason[k]))
                        for k in range(a, b)) for a, b in zip(starts, starts[1:])]
        assert starts[0] == ptr[i] or ptr[i] == ptr[i + 1]
        assert found == want, f"op {i}"


@pytest.mark.parametrize("seed", range(40, 48))
def test_slices_of_any_size_give_the_same_records(seed):
    table = _random_program(seed).b.table()
    whole = core.simulate(table)
    for budget in (1, 2, 7):
        assert whole.differences(core.simulate(table, budget=budget)) == []


@pytest.mark.parametrize("seed", range(4))
def test_entries_of_repeats_each_rows_entries_in_op_order(seed):
    """``entries_of`` (how SME's table repeats the dependencies of its distinct instructions)
    is the rows' entries one op after the other, the empty rows included."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 4, 12)
    starts = np.concatenate([[0], np.cumsum(counts)])
    which = rng.integers(0, 12, 50)
    want = [starts[r] + j for r in which for j in range(counts[r])]
    assert entries_of(starts, which, counts[which]).tolist() == want


def test_every_column_of_a_table_is_contiguous():
    """Rows added one by one, one chunk, or both: the core's kernels are compiled for
    contiguous columns, and one signature serves every table (``hwsim.timing.warm``)."""
    def builder():
        return OpBuilder([UnitSpec("a"), UnitSpec("b")], [PortSpec("p", 4.0)])

    by_rows = builder()
    by_rows.add("a", 1, writes=("r",), transfers=((0, 8),))
    by_rows.add("b", 2, reads=("r",))
    one_chunk = builder()
    one_chunk.extend(Chunk(np.array([0, 1], np.int32), np.array([1, 2], np.int64),
                           dep_count=np.array([1, 1]), dep_res=np.array([0, 0], np.int32),
                           dep_mode=np.array([2, 0], np.int8), xfer_count=np.array([1, 0]),
                           xfer_port=np.array([0], np.int32), xfer_bytes=np.array([8])))
    both = builder()
    both.add("a", 1, writes=("r",))
    both.extend(Chunk(np.array([1], np.int32), np.array([2], np.int64)))
    for b in (by_rows, one_chunk, both):
        table = b.table()
        columns = [v for v in vars(table).values() if isinstance(v, np.ndarray)]
        assert columns and all(c.flags.c_contiguous for c in columns)
