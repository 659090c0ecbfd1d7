"""GAP9 external memory (L3): the micro-DMA moves real bytes between L3 and L2 at the link's
rate, and the plan puts constants that do not fit MRAM, and tensors that do not fit L2, in L3
(bit-exact against the TOSA reference, with L3 traffic reported as its own level)."""

import numpy as np
import pytest

import hwsim
from hwsim.errors import ScheduleError
from hwsim.schedule import compile_model, estimate, prepare
from hwsim.schedule.run import simulate
from hwsim.tosa.models import model, sample_input

L1, L2 = 0x10000000, 0x1C000000
SMALL_MRAM = {"mram_size": 8192}                    # MobileNet x0.25 at 24x24: 234 KB of weights
SMALL_L2 = {"l1_size": 24576, "l2_size": 18432}     # ResNet-8 x0.5 at 32x32 spills activations


def verdicts(report):
    return [r.verdict for r in report.layers] + list(report.output_verdicts.values())


def test_the_micro_dma_moves_bytes_from_l3_through_l2_to_l1():
    m = hwsim.machine("gap9")
    data = np.arange(4096, dtype=np.uint8)
    m.memory("l3").write(0x100, data)
    result = m.run(f""".target gap9
dma l3:0x100 -> l2:{L2:#x} 4096
dma wait
dma l2:{L2:#x} -> l1:{L1:#x} 4096
dma wait
dma l1:{L1:#x} -> l2:{L2 + 0x2000:#x} 4096
dma wait
dma l2:{L2 + 0x2000:#x} -> l3:0x8000 4096
dma wait
""")
    assert np.array_equal(m.memory("l3").read(0x8000, 4096), data)
    # two micro-DMA transfers of 4096 B at 0.9 B/cycle + 100 latency (2 x 4652), two cluster
    # DMA transfers at 8 B/cycle + 10 (2 x 522), 52 cycles of controller programming and waits
    assert result.stats["ports"]["l3"]["bytes"] == 8192
    assert result.cycles == 2 * 4652 + 2 * 522 + 52


def test_a_copy_that_does_not_wait_for_the_micro_dma_moves_stale_bytes():
    m = hwsim.machine("gap9")
    m.memory("l3").write(0x0, np.full(256, 7, np.uint8))
    m.run(f""".target gap9
dma l3:0x0 -> l2:{L2:#x} 256
dma l2:{L2:#x} -> l1:{L1:#x} 256
dma wait
""")
    assert not m.memory("l1").read(L1, 256).any()          # read before the bytes landed


def test_weights_in_l3_are_bit_exact():
    graph = model("mobilenet_v1", width=0.25, resolution=24)
    report = estimate(graph, "gap9", check=True, params=SMALL_MRAM)
    assert all(v.status == "exact" for v in verdicts(report))
    levels = report.totals["levels"]
    assert list(levels) == ["L3", "L2", "MRAM", "L1"]
    assert levels["L3"]["bytes"] == sum(r.bytes["L3"] for r in report.layers) == 232844
    assert levels["MRAM"]["bytes"] == 7624
    assert report.cycles == 372740
    assert any("udma" in r.units for r in report.layers)
    native = estimate(graph, "gap9", mode="ne16", check=True, params=SMALL_MRAM)
    assert max(r.verdict.max_err for r in native.layers) <= 1
    assert native.totals["levels"]["L3"]["bytes"] == 218892


def test_the_weights_really_come_from_l3():
    """The same program with the L3 part of its memory image left out computes other
    numbers: the weights reach NE16 and the cores only through the micro-DMA."""
    graph = model("mobilenet_v1", width=0.25, resolution=24)
    _, _, _, _, machine, run_params, _, lowered = prepare(graph, "gap9", params=SMALL_MRAM)
    assert {space for space, _, _ in lowered.image} == {"mram", "l3"}
    feeds = {graph.inputs[0].name: sample_input(graph)}
    full = simulate(lowered, machine, feeds, run_params)
    lowered.image = [part for part in lowered.image if part[0] != "l3"]
    _, _, _, _, fresh, _, _, _ = prepare(graph, "gap9", params=SMALL_MRAM)
    empty = simulate(lowered, fresh, feeds, run_params)
    name = graph.outputs[0].name
    assert not np.array_equal(full.outputs[name], empty.outputs[name])
    assert full.result.cycles == empty.result.cycles


def test_activations_spilled_to_l3_are_bit_exact():
    graph = model("resnet8", width=0.5, resolution=32)
    roomy = estimate(graph, "gap9", numerics=False, params={**SMALL_L2, "l2_size": 24576})
    report = estimate(graph, "gap9", check=True, params=SMALL_L2)
    assert all(v.status == "exact" for v in verdicts(report))
    assert roomy.totals["levels"]["L3"]["bytes"] == 0
    assert report.totals["levels"]["L3"]["bytes"] == 39952
    assert (roomy.cycles, report.cycles) == (227118, 272078)


def test_a_compiled_trace_with_l3_runs_with_the_same_cycles(tmp_path):
    graph = model("mobilenet_v1", width=0.25, resolution=24)
    path = compile_model(graph, tmp_path / "model.trace", params=SMALL_MRAM)
    assert any(line.startswith(".load l3 ") for line in path.read_text().splitlines())
    result = hwsim.machine("gap9", **SMALL_MRAM).run(path)
    assert result.expect_failures == []
    assert result.cycles == estimate(graph, "gap9", params=SMALL_MRAM).cycles


def test_too_little_external_memory_is_a_clear_error():
    graph = model("mobilenet_v1", width=0.25, resolution=24)
    with pytest.raises(ScheduleError, match=r"constants take \d+ bytes; MRAM has 8192 and L3 "
                                            r"4096"):
        estimate(graph, "gap9", numerics=False, params={**SMALL_MRAM, "l3_size": 4096})
    with pytest.raises(ScheduleError, match="L2 \\(8192 bytes\\) cannot hold the operands"):
        estimate(model("resnet8", width=0.5, resolution=32), "gap9", numerics=False,
                 params={**SMALL_L2, "l2_size": 8192})


@pytest.mark.slow
@pytest.mark.parametrize("mode, cycles, l3_bytes", [("exact", 40642860, 1595392),
                                                     ("ne16", 20432108, 1585152)])
def test_mobilenet_v1_224_keeps_weights_in_l3(mode, cycles, l3_bytes):
    """MobileNetV1 x1.0 at 224x224 (3.26 MB of constants; MRAM holds 2 MB): its last
    pointwise and fully connected layers' weights come from L3, checked against the
    reference (about 10 s per mode here)."""
    report = estimate(model("mobilenet_v1", width=1.0, resolution=224), "gap9", mode=mode,
                      check=True)
    assert (report.cycles, report.totals["levels"]["L3"]["bytes"]) == (cycles, l3_bytes)
    assert [r.index for r in report.layers if r.bytes["L3"]] == [24, 26]
    if mode == "exact":
        assert all(v.status == "exact" for v in verdicts(report))
    else:
        assert max(r.verdict.max_err for r in report.layers) <= 1
