"""Speed of the SME machine: engine instructions per second and datapath element rates.

    PYTHONPATH=. python benchmarks/bench_sme.py      # prints a table, writes results/sme.json

* engine: simulated instructions per second of whole runs (``Machine.run`` on an assembled
  program, statistics on, timeline off) for an fp32 GEMM inner loop (4 loads, 4 FMOPA, 2 adds per
  step), an FMOPA-only stream and a scalar-only stream;
* datapath: element operations per second of the outer-product kernels called directly (one
  element = one tile element updated by one instruction), at SVL 512 (the M4) and 2048, for
  non-widening BFMOPA (one fused multiply-add with a single rounding per element), FMOPA fp32,
  widening BFMOPA/FMOPA and SMOPA.

Each figure is the best of ``REPEATS`` timings of this process's CPU time (robust on a shared
machine), after a warm-up run that loads the numba caches.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

import hwsim
from hwsim.isa import sme
from hwsim.targets.sme import kernels, numerics
from common import best

REPEATS = 5
RESULTS = Path(__file__).resolve().parent / "results" / "sme.json"


def programs(steps: int) -> dict[str, list]:
    setup = ["smstart", "ptrue p0.s", "mov x0, #0x10000", "mov x1, #0x20000", "zero {za}"]
    gemm, fmopa, scalar = list(setup), list(setup), list(setup)
    for step in range(steps):
        a0, a1, b0, b1 = (4 * (step % 8) + i for i in range(4))
        gemm += [f"ld1w {{z{a0}.s}}, p0/z, [x0]", f"ld1w {{z{a1}.s}}, p0/z, [x0, #1, mul vl]",
                 f"ld1w {{z{b0}.s}}, p0/z, [x1]", f"ld1w {{z{b1}.s}}, p0/z, [x1, #1, mul vl]",
                 f"fmopa za0.s, p0/m, p0/m, z{a0}.s, z{b0}.s",
                 f"fmopa za1.s, p0/m, p0/m, z{a0}.s, z{b1}.s",
                 f"fmopa za2.s, p0/m, p0/m, z{a1}.s, z{b0}.s",
                 f"fmopa za3.s, p0/m, p0/m, z{a1}.s, z{b1}.s",
                 "add x0, x0, #128", "add x1, x1, #128"]
        fmopa += [f"fmopa za{t}.s, p0/m, p0/m, z{t}.s, z{t + 4}.s" for t in range(4)]
        scalar += ["add x0, x0, #128", "add x1, x1, #128", "sub x2, x0, #64", "mov w12, #4"]
    return {name: sme.assemble_program("\n".join(lines))
            for name, lines in (("gemm_fp32_loop", gemm), ("fmopa_stream", fmopa),
                                ("scalar_stream", scalar))}


def engine_rates(steps: int = 1500) -> dict[str, float]:
    rates = {}
    for name, program in programs(steps).items():
        m = hwsim.machine("sme", mem_size=64 << 20)
        m.run("smstart\n")                # entering streaming mode zeroes Z: do it first
        rng = np.random.default_rng(0)   # normal fp32 inputs, as in a real GEMM
        m.memory("mem").write(0x10000, rng.standard_normal(steps * 64).astype(np.float32))
        m.state.zv[4][...] = rng.standard_normal(m.state.zv[4].shape).astype(np.float32).view(
            np.uint32)
        seconds = best(lambda: m.run(program, record=False), 3, time.process_time)
        rates[name] = len(program) / seconds
    return rates


def _values(rng, n, fmt, dtype):
    e, mb = fmt
    bias = (1 << (e - 1)) - 1
    return ((rng.integers(0, 2, n) << (e + mb)) | (rng.integers(bias - 3, bias + 3, n) << mb)
            | rng.integers(0, 1 << mb, n)).astype(dtype)


def datapath_rates() -> dict[str, float]:
    rng = np.random.default_rng(1)
    ctl = numerics.controls(0, True, "pseudocode")
    rates = {}
    for svl in (512, 2048):
        n = svl // 8
        ones = np.ones(n, bool)
        cases = {
            "bfmopa_nonwidening": (2, 2, (8, 7), np.uint16, lambda za, t, a, b: kernels.mopa_fma(
                za, 0, t, a, b, ones, ones, 2, False, 8, 7, ctl)),
            "fmopa_fp32": (4, 4, (8, 23), np.uint32, lambda za, t, a, b: kernels.mopa_fma(
                za, 0, t, a, b, ones, ones, 4, False, 8, 23, ctl)),
            "bfmopa_widening": (4, 2, (8, 7), np.uint16, lambda za, t, a, b: kernels.mopa_dot2(
                za, 0, t, a, b, ones, ones, False, 2, ctl)),
            "fmopa_widening_fp16": (4, 2, (5, 10), np.uint16, lambda za, t, a, b:
                                    kernels.mopa_dot2(za, 0, t, a, b, ones, ones, False, 0, ctl)),
            "smopa_int8": (4, 1, None, np.uint8, lambda za, t, a, b: kernels.mopa_int8(
                za, 0, t, a, b, ones, ones, False, False, False)),
        }
        for name, (tsize, ssize, fmt, dtype, call) in cases.items():
            dim = n // tsize   # a tile of the ZA array, as the machine passes it
            tile_dtype = np.uint16 if tsize == 2 else np.uint32
            za = _values(rng, n * dim, fmt if tsize == 2 else (8, 23), tile_dtype).reshape(n, dim)
            a, b = ((_values(rng, n // ssize, fmt, dtype) if fmt else
                     rng.integers(0, 256, n).astype(dtype)) for _ in range(2))
            calls = max(20, 400_000 // (dim * dim))
            seconds = best(lambda: [call(za, tsize, a, b) for _ in range(calls)], REPEATS,
                           time.process_time)
            rates[f"{name}_svl{svl}"] = calls * dim * dim / seconds
    return rates


def main() -> None:
    results = {"engine_instructions_per_second": engine_rates(),
               "datapath_elements_per_second": datapath_rates()}
    for group, values in results.items():
        print(group)
        for name, value in values.items():
            print(f"  {name:<32} {value:12.3g}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print("wrote", RESULTS)


if __name__ == "__main__":
    main()
