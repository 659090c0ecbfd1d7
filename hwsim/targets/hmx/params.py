"""Parameters of the HMX machine: sizes and numeric readings (``arch``) and costs (``timing``).

Costs are calibrated on the V79 measurements in docs/sources.md#hmx (an HMX fork of
qualcomm/hexagon-mlir, ``HmxLeafCostTable.h``, "verified on OnePlus 13, Hexagon v79"); the V81
manual itself gives no cycle counts. Each row says where its value comes from.
"""

from hwsim.timing.params import (ADDRESS, BANDWIDTH, CLOCK, COST, LATENCY, OCCUPANCY,
                                  PORT_WIDTH, QUEUE, Param, ParamTable, Range)

V79 = "sources.md#hmx (V79 costs, HmxLeafCostTable.h in an HMX fork of qualcomm/hexagon-mlir)"

# An HVX or HMX cost per 128-byte vector: 0.01 (100 vectors a cycle) is beyond any datapath
# of these parts; 1,000 cycles per vector is beyond a cold DDR access per vector.
PER_VECTOR = Range(0.01, 1000, "100 vectors per cycle to 1,000 cycles per vector")

PARAMS = ParamTable([
    # -- architecture: state and numerics ------------------------------------------------------
    Param("vtcm_size", 8 << 20, "bytes", "sources.md#hmx: 8 MB VTCM on V69-V81 phone parts "
          "(Qualcomm SoC table in ExecuTorch qc_schema.py)", kind="arch",
          valid=Range(4096, 256 << 20, "two croutons to 32x the 8 MB of the largest VTCM")),
    Param("vtcm_base", 0, "address", "assumption: a 2 KB aligned base; 0 makes the manual's "
          "example offsets (chapter 3) the addresses", kind="arch", valid=ADDRESS),
    Param("ddr_size", 256 << 20, "bytes", "assumption: room for the tensors of a model layer",
          kind="arch", valid=Range(4096, 1 << 32, "HMX and DMA addresses are 32 bits")),
    Param("ddr_base", 0x8000_0000, "address", "assumption: apart from VTCM so that an address "
          "says which memory it is in", kind="arch", valid=ADDRESS),
    Param("acc_exp_bits", 7, "bits", "quic/qemu target/hexagon HMX model: QDSP6_MX_FP_ACC_EXP = 7; "
          "the fraction is the rest of the 37-bit cell (manual 2.2.3)", kind="arch",
          choices=(6, 7, 8), doc="exponent bits of the 37-bit accumulator (sign + exp + fraction)"),
    Param("acc_round_group", 0, "channels", "assumption: the manual gives no rounding points; 0 "
          "rounds each instruction's exact dot product once", kind="arch",
          valid=Range(0, 1024, "0, or up to 32x the 32 channels of a weight crouton"),
          doc="input channels summed exactly per rounding (0: per instruction)"),
    Param("shape_row3", "abs", "", "manual Table 5 (section 2.3.1): rows 3 "
          "and 7 print 'x' and '- x', duplicates of rows 0 and 4; read as |x| and -|x| whose bars "
          "were lost in the text ('identity': as printed)", kind="arch",
          choices=("abs", "identity")),
    # -- timing ---------------------------------------------------------------------------------
    Param("clock_hz", 2.11e9, "Hz", f"{V79}: Hexagon V79 at about 2.11 GHz", valid=CLOCK),
    Param("mpy_setup_cycles", 8, "cycles", f"{V79}: one engine call with one tile step takes "
          "22-26 cycles; 8 + 16 weight vectors = 24", valid=COST),
    Param("mpy_cycles_per_vector", 1.0, "cycles", "assumption: one 128-byte weight vector (2 "
          "input channels x 32 filters, manual 2.2.2) per cycle = 2048 MACs/cycle",
          valid=PER_VECTOR),
    Param("mpy_flush_cycles_per_vector", 1.0, "cycles", "assumption: an excess weight vector "
          "costs its read slot (manual 2.2.2: 'wastes cycles flushing')",
          valid=Range(0, 1000, "0 (flushing is free) to 1,000 cycles")),
    Param("cvt_cycles", 32, "cycles", "assumption: 32 accumulator cells converted per cycle",
          valid=OCCUPANCY),
    Param("cvt_write_cycles", 16, "cycles", "assumption: one 128-byte vector (2 spatials, "
          "Figure 19) stored per cycle", valid=OCCUPANCY),
    Param("bias_cycles", 2, "cycles", "assumption: the two 128-byte bias vectors (Figure 13) "
          "at one per cycle", valid=OCCUPANCY),
    Param("clracc_cycles", 1, "cycles", "assumption: clearing is a reset of the array",
          valid=OCCUPANCY),
    Param("usr_cycles", 1, "cycles", "assumption: one packet writes a control register",
          valid=OCCUPANCY),
    Param("hmx_queue_depth", 8, "ops", "assumption: instructions buffered ahead of each HMX "
          "unit", valid=QUEUE),
    Param("vtcm_hmx_bytes_per_cycle", 256, "B/cycle", "assumption: an activation and a weight "
          "vector (2 x 128 B) per cycle keep the multiply fed", valid=PORT_WIDTH),
    Param("vtcm_hvx_bytes_per_cycle", 256, "B/cycle", "assumption: two 128-byte HVX vector "
          "accesses per packet", valid=PORT_WIDTH),
    Param("vtcm_dma_bytes_per_cycle", 128, "B/cycle", "assumption: one 128-byte VTCM beat per "
          "cycle for DMA", valid=PORT_WIDTH),
    Param("vtcm_latency_cycles", 4, "cycles", "assumption: VTCM access latency", valid=LATENCY),
    Param("hvx_act_pack_cycles_per_vector", 6.1, "cycles", f"{V79}: packing a 2 KB activation "
          "crouton takes 91-104 cycles warm (97.5 / 16 vectors)", valid=PER_VECTOR),
    Param("hvx_act_unpack_cycles_per_vector", 6.6, "cycles", f"{V79}: unpacking an output "
          "crouton takes 86-126 cycles (106 / 16 vectors)", valid=PER_VECTOR),
    Param("hvx_wgt_pack_cycles_per_vector", 11.5, "cycles", f"{V79}: packing a weight crouton "
          "takes 180-188 cycles (184 / 16 vectors)", valid=PER_VECTOR),
    Param("hvx_bias_pack_cycles_per_vector", 11.5, "cycles", "assumption: a gather of 32 "
          "channels per output vector, as for weights", valid=PER_VECTOR),
    Param("hvx_elementwise_cycles_per_vector", 1.0, "cycles", "assumption: one packet loads, "
          "computes and stores a 128-byte vector", valid=PER_VECTOR),
    Param("hvx_copy_cycles_per_vector", 1.0, "cycles", "assumption: one 128-byte load, "
          "realignment and store per packet; a row shorter than a vector costs a whole one",
          valid=PER_VECTOR),
    Param("hvx_exp_cycles_per_vector", 6.0, "cycles", "assumption: range reduction, a "
          "degree-4 polynomial and the exponent insert, about 12 vector ops two per packet",
          valid=PER_VECTOR),
    Param("hvx_recip_cycles_per_vector", 4.0, "cycles", "assumption: a table seed and two "
          "Newton-Raphson steps, about 8 vector ops two per packet", valid=PER_VECTOR),
    Param("hvx_reduce_cycles_per_vector", 2.0, "cycles", "assumption: FP16 widened to two FP32 "
          "vectors and accumulated, one add per packet", valid=PER_VECTOR),
    Param("hvx_convert_cycles_per_vector", 1.0, "cycles", "assumption: one FP32 vector "
          "converted (and packed or unpacked with its pair) per packet", valid=PER_VECTOR),
    Param("hvx_queue_depth", 8, "ops", "assumption: HVX instructions buffered ahead", valid=QUEUE),
    Param("ddr_bytes_per_cycle", 45.7, "B/cycle", f"{V79}: DDR -> VTCM DMA at 96.4 GB/s on one "
          "thread, / 2.11 GHz", valid=BANDWIDTH),
    Param("ddr_latency_cycles", 250, "cycles", f"{V79}: packing a crouton cold from DDR takes "
          "392 cycles vs ~97 warm; minus 45 cycles of 2 KB transfer", valid=LATENCY),
    Param("dma_setup_cycles", 16, "cycles", "assumption: writing one DMA descriptor", valid=COST),
    Param("dma_channels", 4, "transfers", "assumption: descriptors in flight at once",
          valid=Range(1, 256, "at least one transfer in flight; 256 is far beyond the hardware")),
])
