"""Parameters of the SME machine, each with its source. Defaults: Apple M4 P-cluster SME unit.

Figures marked sources.md#m4-sme are the M4 measurements in docs/sources.md
(tzakharko/m4-sme-exploration, "Hello SME!" arXiv:2409.18779). Rates are MACs per cycle per
datapath, so an instruction's issue time follows from its size at any SVL (at SVL 512: FMOPA .S
is 256 MACs, widening 16-bit 512, int8 4-way 1024, a non-widening .H tile 1024).
"""

from hwsim.timing.params import (CLOCK, COST, LATENCY, OCCUPANCY, PORT_WIDTH, QUEUE, Param,
                                  ParamTable, Range)

_M4 = "sources.md#m4-sme (M4, tzakharko/m4-sme-exploration)"
_SSVE = "sources.md#m4-sme (M4, tzakharko/m4-sme-exploration, results/ssve-vector.json)"

MACS = Range(1, 65536, "at least one MAC per cycle; 65,536 is 4x one int8 outer product at "
              "SVL 2048")
OPS = Range(1, 100, "at least one instruction per vector; 100 is 3x the longest routine")

PARAMS = ParamTable([
    # -- architecture ----------------------------------------------------------------------
    Param("svl", 512, "bits", f"{_M4}: streaming vector length 512 bits", kind="arch",
          choices=(128, 256, 512, 1024, 2048), doc="streaming vector length SVL"),
    Param("mem_size", 16 << 20, "bytes", "assumption: a flat memory large enough for the "
          "examples; caches are not modelled (see the port parameters)", kind="arch",
          valid=Range(4096, 1 << 32, "a page to 4 GB of flat memory")),
    Param("feat_afp", True, "bool", "assumption: FEAT_AFP (FPCR.AH, FIZ) as on Apple M2 and "
          "later cores; false makes those bits RES0", kind="arch"),
    Param("feat_ebf16", False, "bool", "assumption: FEAT_EBF16 not assumed, so FPCR.EBF is RES0 "
          "and widening BFMOPA rounds to odd (Arm ARM A1.5.11, C5.2)", kind="arch"),
    Param("feat_sme_b16b16", True, "bool", f"{_M4}: M4 lacks it (non-widening BFMOPA faults); "
          "on by default so that the non-widening BFMOPA runs", kind="arch"),
    Param("bf16_sop_dn", "pseudocode", "reading", "Arm ARM A1.5.11 text ('as if FPCR.AH is 0') "
          "vs pseudocode J1.3.3.155/.163 (FPDefaultNaN with FPCR.AH); QEMU follows the "
          "pseudocode", kind="arch", choices=("pseudocode", "text"),
          doc="sign of the default NaN of widening BFMOPA with FPCR.EBF=0 and FPCR.AH=1"),
    # -- timing: clock and outer products ---------------------------------------------------
    Param("clock_hz", 3.9e9, "Hz", f"{_M4}: FMOPA .S 2000 GFLOPS at 1 per cycle -> ~3.9 GHz",
          valid=CLOCK),
    Param("fp32_macs_per_cycle", 256, "MAC/cycle", f"{_M4}: FMOPA fp32 1 per cycle (16x16)",
          valid=MACS),
    Param("fp32_latency_cycles", 4, "cycles", f"{_M4}: FMOPA fp32 latency 4", valid=LATENCY),
    Param("wide16_macs_per_cycle", 256, "MAC/cycle", f"{_M4}: BFMOPA/FMOPA 16->32 bit 1 per 2 "
          "cycles (two fp32 passes)", valid=MACS),
    Param("wide16_latency_cycles", 8, "cycles", f"{_M4}: BFMOPA/FMOPA widening latency 8",
          valid=LATENCY),
    Param("int8_macs_per_cycle", 512, "MAC/cycle", f"{_M4}: SMOPA int8 4-way 1 per 2 cycles "
          "(4000 GOPS)", valid=MACS),
    Param("int8_latency_cycles", 4, "cycles", f"{_M4}: SMOPA latency 4", valid=LATENCY),
    Param("b16b16_macs_per_cycle", 256, "MAC/cycle", "assumption: non-widening 16-bit outer "
          "products do not exist on M4; assumed to use the 16-bit multipliers of the widening "
          "path at its rate (a 32x32 .H tile in 4 cycles)", valid=MACS),
    Param("b16b16_latency_cycles", 8, "cycles", "assumption: as the widening 16-bit path",
          valid=LATENCY),
    Param("mopa_switch_cycles", 1, "cycles", f"{_M4}: +1 cycle per switch between fp32 and "
          "fp64 outer products; assumed for any change of datapath", valid=COST),
    Param("za_move_cycles", 1, "cycles", "assumption: MOVA and ZERO occupy the matrix unit one "
          "cycle (no M4 figure)", valid=OCCUPANCY),
    Param("za_move_latency_cycles", 4, "cycles", "assumption: as an fp32 outer product",
          valid=LATENCY),
    # -- timing: memory -------------------------------------------------------------------------
    Param("load_ports", 2, "ports", f"{_M4}: 420-470 GB/s of loads via Z registers, i.e. about "
          "two 64-byte vectors per cycle at 3.9 GHz (2 x 64 B model 499 GB/s)",
          valid=Range(1, 16, "at least one load port; 16 is 4x any core")),
    Param("load_port_bytes_per_cycle", 64, "B/cycle", f"{_M4}: see load_ports", valid=PORT_WIDTH),
    Param("store_port_bytes_per_cycle", 64, "B/cycle", f"{_M4}: about 210 GB/s of stores; one "
          "64-byte vector per cycle models 250 GB/s (ports move whole cycles)", valid=PORT_WIDTH),
    Param("load_latency_cycles", 20, "cycles", "assumption: an L2 hit (SME loads bypass the "
          "core's L1); no M4 figure", valid=LATENCY),
    Param("store_latency_cycles", 20, "cycles", "assumption: an L2 write, taken equal to the "
          "load latency; no M4 figure", valid=LATENCY),
    Param("za_array_transfer_cycles", 2, "cycles", f"{_M4}: LDR/STR ZA is slower than going "
          "through Z registers (no figure): assumed to hold the memory pipe 2 cycles",
          valid=OCCUPANCY),
    Param("mem_in_flight", 48, "ops", "assumption: outstanding loads and stores of the "
          "decoupled load/store unit, enough to sustain the measured 420-470 GB/s at the assumed "
          "latency (Little's law: 2 vectors per cycle x 21 cycles = 42; 16 would cap loads at "
          "0.76 vectors per cycle, 190 GB/s)", valid=QUEUE),
    # -- timing: control -------------------------------------------------------------------------
    Param("scalar_issue_width", 4, "ops/cycle", "assumption: address arithmetic on the core's "
          "integer ALUs, several per cycle",
          valid=Range(1, 64, "at least one op per cycle; 64 is 8x any core")),
    Param("scalar_latency_cycles", 1, "cycles", "assumption: a one-cycle integer ALU, as on any "
          "recent core", valid=LATENCY),
    Param("predicate_latency_cycles", 2, "cycles", "assumption: PTRUE/WHILELT in the SME "
          "unit's predicate pipe", valid=LATENCY),
    Param("smstart_cycles", 20, "cycles", "assumption: SMSTART/SMSTOP drain and reset register "
          "state; no M4 figure", valid=COST),
    Param("queue_depth", 16, "ops", "assumption: instructions each unit buffers ahead of the "
          "in-order front end", valid=QUEUE),
    # -- timing: the streaming-SVE vector side (routines, ``vector``) ------------------------
    Param("ssve_cycles_per_op", 4, "cycles", f"{_SSVE}: FMLA .S 31 GFLOPS and .D 15.6 GFLOPS on "
          "one thread, i.e. one streaming-SVE vector instruction per 4 cycles at 3.9 GHz",
          valid=Range(1, 64, "whole cycles, at least one; 64 is 16x the measured 4")),
    Param("ssve_latency_cycles", 8, "cycles", f"{_SSVE}: one dependent FMLA chain reaches half "
          "the throughput (15.7 GFLOPS .S), i.e. 8 cycles", valid=LATENCY),
    Param("vec_convert_ops", 2, "ops/vector", "assumption: packing to BF16 converts and "
          "narrows (BFCVT, UZP1) each source vector once; offsetting int8 to unsigned (EOR) is "
          "counted the same; the transposition itself goes through ZA (loads and stores only)",
          valid=OPS),
    Param("vec_unary_ops", 2, "ops/vector", "assumption: CLAMP is SMAX+SMIN (FMAXNM+FMINNM); "
          "CLZ, EXP's neighbours and casts are one or two ALU ops", valid=OPS),
    Param("vec_binary_ops", 1, "ops/vector", "assumption: one ALU op (ADD, SUB, MUL, SMAX, "
          "FADD, ASR, LSL, ...) per output vector", valid=OPS),
    Param("vec_rescale_ops", 16, "ops/vector", "assumption: the TOSA-exact RESCALE of 16 int32 "
          "lanes: SUB (zero point), SUNPKLO/HI, MUL .D x2, CMPLT x2, SEL x2 (double-round "
          "offsets), ADD x2, ASR x2, UZP1, ADD (zero point), SMAX, SMIN", valid=OPS),
    Param("vec_table_ops", 30, "ops/vector", "assumption: an interpolated 16-bit TABLE (513 "
          "entries in 17 Z registers; no gathers in streaming mode): per 32 halfword lanes two "
          "lookups of 9 SUB+TBL+ORR on register pairs plus the interpolation, ~60 ops, so ~30 per "
          "16 int32 lanes", valid=OPS),
    Param("vec_reduce_ops", 1, "ops/vector", "assumption: one ADD/SMAX/FADD/FMAX per input "
          "vector; the final horizontal reduction is negligible", valid=OPS),
    Param("vec_pool_ops", 1, "ops/vector", "assumption: one ADD/SMAX per window element and "
          "output vector (each window element is loaded once through the ports)", valid=OPS),
    Param("vec_exp_ops", 14, "ops/vector", "assumption: fp32 EXP as range reduction (FMUL, "
          "FRINTN, FMLS), FEXPA and a degree-4 polynomial (FMLA x4) with scaling and fix-ups",
          valid=OPS),
    Param("vec_reciprocal_ops", 5, "ops/vector", "assumption: FRECPE and two Newton steps "
          "(FRECPS, FMUL)", valid=OPS),
])
