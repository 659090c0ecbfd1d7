"""Speed of the HMX model: simulated instructions per second and multiply-datapath MACs per second.

    PYTHONPATH=. python benchmarks/bench_hmx.py [--quick]

(the timing core alone is measured by bench_engine.py)

* ``control_instr_per_s``: HMX control instructions (bias load and store, clear accumulators,
  USR writes), each doing its real work, through ``Machine.run`` without a timeline;
* ``gemm_instr_per_s``: a GEMM stream (multiply of one crouton, convert, write) where the
  datapath kernels dominate, with its simulated MACs per second;
* ``mpy_macs_per_s``: the exact multiply kernel alone, one crouton (k = 32) and 32 croutons deep
  (k = 1024) into a 32 x 32 accumulator, on standard normal FP16 data (at k = 1024 wide enough
  that many sums need split operands); ``mpy_vtcm_macs_per_s``: the machine's multiply
  datapath (operands gathered from VTCM) on the GEMM benchmark's data, the same weights each
  time as for the tiles of one filter group (decoded once); ``cvt_cells_per_s``: the convert
  kernel alone;
* ``hvx_pack_act_bytes_per_s``, ``hvx_unpack_act_bytes_per_s``: the crouton layout kernels;
  ``hvx_add_elements_per_s``: the FP16 elementwise add.

Parsing is timed apart (``parse_lines_per_s``). Prints a table and writes
benchmarks/results/hmx.json. Times are the best of five runs in process CPU time (everything
measured is single-threaded), which a shared machine disturbs less than wall time; they still
depend on the machine and its load.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

import hwsim
from hwsim.targets.hmx import datapath, hvx_kernels, layouts, numerics
from hwsim.traces.files import atomic_write_text
from hwsim.traces.reader import parse_trace
from common import best, provenance

RESULTS = Path(__file__).resolve().parent / "results" / "hmx.json"


def best_rate(fn, count: float, repeat: int = 5) -> float:
    """``count`` divided by the fastest of ``repeat`` timed calls of ``fn`` (process CPU time)."""
    return count / best(fn, repeat, clock=time.process_time, warm_up=False)


def control_program(n: int) -> str:
    lines = []
    for i in range(n):
        k = i % 4
        lines += [f"Q6_bias_mxmem2_A({0x3000 + 256 * k:#x} | {k})", "Q6_mxclracc_hf()",
                  f"Q6_mxmem2_bias_A({0x4000 + 256 * k:#x} | {k})", f"USR = {i % 2} << 20"]
    return "\n".join(lines) + "\n"


def gemm_program(n: int) -> str:
    lines = ["Q6_bias_mxmem2_A(0x3000)"]
    for i in range(n):
        lines += [f"Q6_activation_hf_mxmem_RR({(i % 4) * 0x800:#x}, 0x77c)",
                  f"Q6_weight_hf_mxmem_RR({0x8000 + (i % 2) * 0x800:#x}, 0x7ff)",
                  "Q6_cvt_hf_acc_R(0)", f"Q6_mxmem_cvt_RR({0x10000 + (i % 4) * 0x800:#x}, 0x700)"]
    return "\n".join(lines) + "\n"


def machine_rates(text: str) -> dict:
    m = hwsim.machine("hmx")
    rng = np.random.default_rng(0)
    m.memory("vtcm").write(0, rng.standard_normal(0x10000 // 2).astype(np.float16))
    lines = parse_trace(text).lines
    parse_rate = best_rate(lambda: m.parse(lines), len(lines), 1)
    program = m.parse(lines)
    results = []
    rate = best_rate(lambda: results.append(m.run(program)), len(program))
    return {"instructions": len(program), "parse_lines_per_s": parse_rate, "instr_per_s": rate,
            "simulated_macs": results[-1].stats["macs"], "cycles": results[-1].cycles}


def kernel_rates() -> dict:
    rng = np.random.default_rng(1)
    out = {}
    for k in (32, 1024):
        act = rng.standard_normal((k, 32)).astype(np.float16).view(np.uint16)
        wgt = rng.standard_normal((k, 32)).astype(np.float16).view(np.uint16)
        acc = np.zeros((32, 32), dtype=np.uint64)
        numerics.multiply(act, wgt, acc, 0, 1, 7, 29, 0)
        reps = max(1, 200_000 // k)
        out[f"mpy_macs_per_s_k{k}"] = best_rate(
            lambda: [numerics.multiply(act, wgt, acc, 0, 1, 7, 29, 0) for _ in range(reps)],
            reps * k * 32 * 32)
    for k in (32, 1024):
        out[f"mpy_vtcm_macs_per_s_k{k}"] = vtcm_multiply_rate(rng, k)
    cells = np.zeros((32, 32), dtype=np.uint64)
    numerics.multiply(rng.standard_normal((32, 32)).astype(np.float16).view(np.uint16),
                      rng.standard_normal((32, 32)).astype(np.float16).view(np.uint16), cells,
                      0, 1, 7, 29, 0)
    fields = [np.full(32, v, dtype=np.int64) for v in (0, 0, 0x3C000, 0)]
    prev, state = np.zeros((32, 32), np.uint32), np.zeros((32, 32), np.uint32)
    args = (cells, *fields, prev, state, numerics.shape_table("abs"), 0, 0, 0, 0, 1, 0, 7, 29)
    numerics.convert(*args)
    out["cvt_cells_per_s"] = best_rate(lambda: [numerics.convert(*args) for _ in range(200)],
                                       200 * 1024)
    return {**out, **hvx_rates(rng)}


def vtcm_multiply_rate(rng, k: int) -> float:
    """The machine's multiply datapath (operands gathered from VTCM croutons and weight
    vectors, results into the buffers) on GEMM-like data (bench_gemm's scales), MAC/s; the
    weights are the same each time, as for the tiles of one filter group."""
    m = hwsim.machine("hmx")
    vtcm = m.memory("vtcm")
    croutons = k // 32
    vtcm.write(0, (rng.standard_normal(croutons * 1024) / 4).astype(np.float16))
    vtcm.write(0x40000, (rng.standard_normal(k * 32) / 32).astype(np.float16))
    act = (f"Q6_activation_hf_mxmem_RR_deep(0x0, {croutons - 1} << 11 | 0x700 | 31 << 2)"
           if croutons > 1 else "Q6_activation_hf_mxmem_RR(0x0, 0x700 | 31 << 2)")
    lines = parse_trace(f"{act}\nQ6_weight_hf_mxmem_RR(0x40000, {k // 2 * 128 - 1})\n").lines
    (step,) = m.parse(lines)
    reps = max(1, 200_000 // k)

    def run():
        for _ in range(reps):
            datapath.multiply(vtcm, m.state, step.plan, [0], m.acc_format, m.acc_round_group,
                              m.buffers)
    run()
    return best_rate(run, reps * k * 32 * 32)


def hvx_rates(rng) -> dict:
    """Bytes per second of the HVX crouton layout kernels and FP16 elements per second of
    the elementwise add, on a (16, 32, 64) FP16 tensor."""
    h, w, c, mask = 16, 32, 64, 0b11100
    tensor = (rng.standard_normal((h, w, c))).astype(np.float16).view(np.uint16)
    grid = layouts.spatial_grid(mask)
    packed = np.empty(layouts.pack_nhwc(tensor, mask).size // 2, dtype=np.uint16)
    flat, back = tensor.reshape(-1), np.empty(tensor.size, dtype=np.uint16)
    out = {"hvx_pack_act_bytes_per_s": best_rate(
        lambda: [hvx_kernels.pack_act(flat, 0, h, w, c, grid, packed) for _ in range(200)],
        200 * 2 * tensor.size)}
    out["hvx_unpack_act_bytes_per_s"] = best_rate(
        lambda: [hvx_kernels.unpack_act(packed, 0, h, w, c, grid, back) for _ in range(200)],
        200 * 2 * tensor.size)
    other = np.ascontiguousarray(flat[::-1])
    out["hvx_add_elements_per_s"] = best_rate(
        lambda: [hvx_kernels.fp16_binary(flat, other, back, False) for _ in range(20)],
        20 * tensor.size)
    return out


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    n = 500 if quick else 5000
    control = machine_rates(control_program(n))
    gemm = machine_rates(gemm_program(n // 2))
    report = {
        "control_instr_per_s": control["instr_per_s"],
        "control_parse_lines_per_s": control["parse_lines_per_s"],
        "gemm_instr_per_s": gemm["instr_per_s"],
        "gemm_simulated_macs_per_s": gemm["instr_per_s"] / gemm["instructions"] *
        gemm["simulated_macs"],
        "gemm_parse_lines_per_s": gemm["parse_lines_per_s"],
        **kernel_rates(),
        "python": platform.python_version(), "machine": platform.machine(),
        **provenance(),
    }
    for key, value in report.items():
        shown = f"{value:,.3g}" if isinstance(value, float) else str(value)
        print(f"{key:<28} {shown}")
    if not quick:
        atomic_write_text(RESULTS, json.dumps(report, indent=2) + "\n")
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
