"""GAP9 parameters: sizes, bandwidths, latencies and costs, each with its source.

sources = docs/sources.md#gap9 (the GAP9 and NE16 facts); GVSoC = gvsoc-pulp ``pulp/ne16/src``;
DORY = pulp-platform/dory ``Hardware_targets/PULP/GAP9/HW_description.json``; PULP-NN =
Garofalo et al., "PULP-NN: accelerating quantized neural networks on parallel ultra-low-power
RISC-V processors", arXiv:1908.11263.
"""

from __future__ import annotations

from hwsim.timing.params import (ADDRESS, BANDWIDTH, CLOCK, COST, LATENCY, OCCUPANCY, Param,
                                  ParamTable, Range)

_KIB = 1 << 10
GAP9 = "sources.md#gap9"
FIT = "fitted to sources.md#gap9-gvsoc (docs/gap9-calibration.md)"
WRITES = Range(1, 64, "a command takes at least one register write")
# A kernel costs work / (cores x rate) cycles: 0.001 makes a 1,000-element kernel 125,000 cycles
CORE_RATE = Range(0.001, 1024, "per core: positive; 1,024 is 30x the sdot peak of 4 MAC/cycle")

PARAMS = ParamTable([
    # -- clock and memories ---------------------------------------------------------------------
    Param("clock_hz", 370e6, "Hz", f"{GAP9}: cluster up to 370 MHz at 0.8 V; NE16 on the "
          "same clock",
          valid=CLOCK),
    Param("l1_size", 128 * _KIB, "bytes", f"{GAP9}: L1 (TCDM) 128 KB", kind="arch",
          valid=Range(4096, 64 << 20, "a page to 512x the 128 KB TCDM")),
    Param("l1_base", 0x10000000, "address", "PULP cluster TCDM base; GVSoC ne16_stream.cpp: "
          "NE16 reaches L1 at 0xY000_0000-0xY001_FFFC", kind="arch", valid=ADDRESS),
    Param("l1_banks", 16, "banks", f"{GAP9}: 16 word-interleaved banks (GVSoC pulp_open cluster)",
          valid=Range(1, 256, "at least one bank; 256 is 16x GAP9's")),
    Param("l1_word_bytes", 4, "bytes", "ne16_package.sv: TCDM ports are 32 bit",
          valid=Range(1, 64, "a byte to a 512-bit word")),
    Param("l2_size", 1536 * _KIB, "bytes", f"{GAP9}: L2 1.5 MB", kind="arch",
          valid=Range(4096, 1 << 30, "a page to 1 GB")),
    Param("l2_base", 0x1C000000, "address", "assumption: the PULP SoC L2 base address",
          kind="arch", valid=ADDRESS),
    Param("mram_size", 2048 * _KIB, "bytes", f"{GAP9}: 2 MB on-chip MRAM", kind="arch",
          valid=Range(4096, 1 << 30, "a page to 1 GB")),
    Param("mram_base", 0x0, "address", "assumption: MRAM is not in the cluster address map; "
          "the DMA addresses it by offset", kind="arch", valid=ADDRESS),
    # -- external memory (L3) behind the micro-DMA: docs/gap9-memory.md ---------------------------
    Param("l3_size", 8 << 20, "bytes", "DORY: L3 dimension 8,000,000 (a model of the board's "
          "external flash and RAM); 8 MiB here", kind="arch",
          valid=Range(4096, 1 << 30, "a page to 1 GB")),
    Param("l3_base", 0x0, "address", "assumption: L3 is not in the cluster address map; the "
          "micro-DMA addresses it by offset", kind="arch", valid=ADDRESS),
    Param("l3_bytes_per_cycle", 0.9, "B/cycle", "sources.md#gap9: HyperBus is an 8-bit DDR "
          "bus at 166 MHz or more (333 MB/s, 0.9 B per 370 MHz cycle); assumption: GAP9's "
          "HyperBus/Octal-SPI link sustains that peak", valid=BANDWIDTH),
    Param("l3_latency_cycles", 100, "cycles", "assumption: the device's initial access "
          "(about 6 HyperBus clocks, twice when it refreshes) plus the fabric controller "
          "queueing the micro-DMA request", valid=LATENCY),
    # -- cluster DMA ----------------------------------------------------------------------------
    Param("l2_bytes_per_cycle", 8.0, "B/cycle", "DORY: L2 bandwidth 8 (a model, not silicon)",
          valid=BANDWIDTH),
    Param("l2_latency_cycles", 10, "cycles", "DORY: L2 latency 10", valid=LATENCY),
    Param("l1_dma_bytes_per_cycle", 32.0, "B/cycle", "DORY: L1 bandwidth 32", valid=BANDWIDTH),
    Param("l1_latency_cycles", 1, "cycles", "DORY: L1 latency 1", valid=LATENCY),
    Param("mram_bytes_per_cycle", 4.0, "B/cycle", "assumption: MRAM reads at half the L2 rate "
          "(no published figure)", valid=BANDWIDTH),
    Param("mram_latency_cycles", 20, "cycles", "assumption: twice the L2 latency (non-volatile "
          "array behind a controller)", valid=LATENCY),
    Param("dma_channels", 16, "transfers", "assumption: the PULP cluster DMA (MCHAN) keeps up to "
          "16 transfer ids in flight",
          valid=Range(1, 256, "at least one transfer in flight; 256 is 16x MCHAN's")),
    Param("dma_setup_cycles", 1, "cycles", "assumption: the DMA engine accepts one command a "
          "cycle once programmed", valid=COST),
    # -- cluster controller ---------------------------------------------------------------------
    Param("cluster_cores", 8, "cores", f"{GAP9}: 8 workers + 1 cluster controller",
          valid=Range(1, 64, "at least one worker; 64 is 8x GAP9's")),
    Param("ctrl_reg_write_cycles", 3, "cycles", "assumption: a store through the cluster "
          "peripheral interconnect (1 issue + ~2 interconnect)", valid=COST),
    Param("ctrl_reg_read_cycles", 4, "cycles", "assumption: a load from a peripheral register "
          "(round trip through the peripheral interconnect)", valid=COST),
    Param("dma_writes_1d", 3, "writes", "assumption: MCHAN command queue: command word, L1 "
          "address, external address", valid=WRITES),
    Param("dma_writes_2d", 5, "writes", "assumption: 1-D command plus row stride and row length",
          valid=WRITES),
    Param("event_wakeup_cycles", 6, "cycles", "assumption: a core sleeping on the event unit "
          "resumes a few cycles after the event", valid=COST),
    Param("kernel_launch_cycles", 100, "cycles", "assumption: dispatching a kernel to 8 workers "
          "(fork through the event unit and per-core setup)", valid=COST),
    Param("barrier_cycles", 10, "cycles", "assumption: hardware barrier in the event unit",
          valid=COST),
    Param("layer_setup_cycles", 2000, "cycles", f"{FIT}: rows of layers with under 100 "
          "cycles of work (10- and 12-element softmax, 640-MAC linear) take 2,005-2,820; the "
          "per-layer code of the SDK's generated network (arguments, tiling set-up) before the "
          "layer's first transfer", valid=COST),
    Param("l1_residency", "promote", "", "assumption: 'promote' keeps an activation in L1 from "
          "producer to last reader when it fits (hwsim's planner); 'none' keeps every "
          "activation in L2 and moves it by DMA per layer, as the GAP SDK without L1 promotion "
          "(the calibration builds)", kind="arch", choices=("promote", "none")),
    # -- NE16 (GVSoC ne16_fsm.cpp and ne16_stream.cpp: sources.md#gap9 "NE16 timing structure")
    Param("ne16_products_per_cycle", 1296, "products", f"{GAP9}: 9 columns x 9 blocks x 16 "
          "channels of 8-bit x 1-bit products per cycle",
          valid=Range(8, 1 << 20, "at least one 8-bit MAC (8 bit-serial products) per cycle")),
    Param("ne16_port_bytes_per_cycle", 36.0, "B/cycle", f"{GAP9}: 9 x 32-bit TCDM ports",
          valid=BANDWIDTH),
    Param("ne16_start_cycles", 1, "cycles", "GVSoC ne16.cpp: the job starts 1 cycle after commit",
          valid=COST),
    Param("ne16_access_cycles", 1, "cycles", f"{GAP9}: each streamer access costs the worst TCDM "
          "latency + 1; the latency is the contention priced separately", valid=OCCUPANCY),
    Param("ne16_load_enter_cycles", 6, "cycles", f"{GAP9}, GVSoC: +6 entering load", valid=COST),
    Param("ne16_mv_enter_3x3_cycles", 6, "cycles", f"{GAP9}, GVSoC: +6 entering "
          "matrix-vector (3x3)",
          valid=COST),
    Param("ne16_mv_enter_1x1_cycles", 10, "cycles", f"{GAP9}, GVSoC: +10 entering matrix-vector "
          "(1x1 and linear)", valid=COST),
    Param("ne16_dw_first_cycles", 22, "cycles", f"{GAP9}, GVSoC: +22 at the first depthwise "
          "channel",
          valid=COST),
    Param("ne16_mv_exit_cycles", 6, "cycles", f"{GAP9}, GVSoC: +6 leaving matrix-vector (not "
          "depthwise)", valid=COST),
    Param("ne16_end_cycles", 1, "cycles", "GVSoC ne16_fsm.cpp: END state latency 1", valid=COST),
    Param("ne16_1x1_slots", 9, "accesses", f"{GAP9}, GVSoC: 1x1 load and streamout padded "
          "to 9 slots",
          valid=Range(1, 64, "at least one access; 64 is 7x the 9 ports")),
    Param("ne16_timeline", "state", "", "assumption: 'state' runs one engine op per controller "
          "state (the GVSoC timeline); 'job' one op per job costing the same states added up, "
          "with L1 contention priced over the whole job (fewer events, for model estimates)",
          choices=("state", "job")),
    # -- NE16 numerics readings (see ne16/datapath.py) -------------------------------------------
    Param("ne16_bias_add", "wrap", "", "RTL ne16_normquant_bias.sv: 32-bit adder, no saturation "
          "(sources.md#gap9 reads 'saturate to int32', a no-op in the pulp-nnx model)", kind="arch",
          choices=("wrap", "saturate")),
    Param("ne16_rounding", "none", "", "RTL ne16_normquant_shifter.sv computes but never adds "
          "its rounding term; 'config0' applies ne16_ctrl.sv's use_rounding = ~CONFIG0[11]",
          kind="arch", choices=("none", "config0")),
    # -- cluster kernels (per core; see cluster_kernels.py for what each counts) -------------------
    Param("cluster_peak_macs_per_cycle", 32.0, "MAC/cycle", f"{GAP9}: 8 cores x 4 int8 MAC (sdot)",
          valid=Range(0.01, 65536, "positive; 65,536 is 2,000x GAP9's")),
    # convolutions, matrix products, pooling (cluster_cost.py)
    Param("cluster_simd_lanes", 4, "lanes", f"{GAP9}: sdot takes 4 int8 pairs per instruction",
          valid=Range(1, 64, "at least one lane; 64 is a 512-bit vector of int8")),
    Param("conv_sdot_cycles", 3.9, "cycles", f"{FIT}: ResNet-8 3x3 rows; an sdot with its "
          "two operand loads and pointer updates",
          valid=Range(0.25, 64, "a quarter cycle (dual issue) to 64")),
    Param("conv_output_cycles", 2.9, "cycles", f"{FIT}: ResNet-8 3x3 rows; per output: "
          "bias, accumulator set-up, normalisation and store", valid=Range(0, 4096, "0 to 4096")),
    Param("conv_stride2_extra", 0.2, "fraction", f"{FIT}: ResNet-8 stride-2 3x3 rows "
          "(20-40% slower per MAC there); neighbouring outputs share no input registers",
          valid=Range(0, 16, "no penalty to 17x slower")),
    Param("conv_channel_setup_cycles", 230, "cycles", f"{FIT}: ResNet-8 3x3 rows (the "
          "8x8 layers pay it most); per output channel and input channel of a core: loop, "
          "weight and pointer set-up", valid=Range(0, 1 << 20, "0 to a million")),
    Param("conv_gather_cycles", 10.0, "cycles", f"{FIT}: ResNet-8 1x1 stride-2 rows; per "
          "byte of the subsampled input, gathered by a 2-D DMA of one-byte elements",
          valid=Range(0, 4096, "0 to 4096")),
    Param("pool_channel_cycles", 230, "cycles", f"{FIT}: ResNet-8 and KWS average pools; "
          "per channel of a core: loop set-up, the division and the store",
          valid=Range(0, 1 << 20, "0 to a million")),
    Param("pool_element_cycles", 0.25, "cycles", "assumption: the window is summed 4 int8 "
          "lanes per SIMD instruction (one load and one sdot per 4 elements)",
          valid=Range(0.01, 4096, "positive, to 4096")),
    Param("eltwise_elements_per_cycle_per_core", 0.5, "elem/cycle", "assumption: two loads, a "
          "multiply-shift per input rescale and a store per element", valid=CORE_RATE),
    Param("rescale_elements_per_cycle_per_core", 0.5, "elem/cycle", "assumption: load, 32x32 "
          "multiply, add, shift, clamp, store", valid=CORE_RATE),
    Param("table_elements_per_cycle_per_core", 0.5, "elem/cycle", "assumption: load, indexed "
          "load, store (int8); int16 adds the interpolation at half that rate", valid=CORE_RATE),
    Param("softmax_elements_per_cycle_per_core", 0.1, "elem/cycle", "assumption: max, exp "
          "lookup, sum, reciprocal and multiply passes, ~10 cycles per element", valid=CORE_RATE),
    Param("reduce_elements_per_cycle_per_core", 1.0, "elem/cycle", "assumption: one load and "
          "one add or compare per element", valid=CORE_RATE),
    Param("copy_bytes_per_cycle_per_core", 2.0, "B/cycle", "assumption: a 32-bit load and store "
          "every 2 cycles", valid=CORE_RATE),
    Param("core_contention_window_cycles", 4096, "cycles", "assumption: cycles of the core "
          "bank-conflict simulation before extrapolating its steady rate",
          valid=Range(16, 1 << 20, "16 cycles to a million cycles of conflicts simulated")),
])
