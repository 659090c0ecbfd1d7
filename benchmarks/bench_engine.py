"""Simulated instructions per second of the timing engines on three instruction streams.

    PYTHONPATH=. python benchmarks/bench_engine.py [--engines compiled simpy] [--scale 1.0]

* ``sme_gemm_loop``: an fp32 GEMM inner loop, per step 4 LD1W, 4 FMOPA on four .S tiles and 2
  ADDs (registers rotated over eight steps so the loads run ahead), numerics on: every FMOPA
  exact;
* ``hmx_deep_multiply``: activation-deep multiplies of 4 croutons (k = 128) into alternating
  accumulators, each followed by a convert and its write, numerics on;
* ``gap9_ne16_cluster``: NE16 jobs (a 3x3 convolution tile each) with their register
  programming and DMA, and cluster kernels (a clamp and an add on the cores) between them,
  numerics on.

Each stream runs through ``Machine.run`` as a user's trace would (decoding, the op table, the
functional semantics, the timing); the figure is instructions (trace lines) per second of wall
time, the best of ``--repeat`` runs after a warm-up, and ops per second (the engine's own
rows: an NE16 job is one op per controller state). Results are printed and saved in
benchmarks/results/engine.json (a run replaces the rows it measured). The aim: 2e6 instructions
per second on the SME loop with numerics on.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import hwsim  # noqa: E402
from hwsim.isa import sme  # noqa: E402
from hwsim.isa.arguments import TensorRef  # noqa: E402
from hwsim.isa.gap9 import Program  # noqa: E402
from hwsim.targets.gap9.ne16.driver import LayerSpec, conv_jobs  # noqa: E402
from hwsim.targets.sme.program import SmeProgram  # noqa: E402
from common import save_rows  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "engine.json"
L1 = 0x10000000


def sme_gemm_loop(steps: int):
    """The loop as words: one step's ten instructions per register rotation, tiled."""
    setup = sme.assemble_program("smstart\nptrue p0.s\nmov x0, #0x10000\nmov x1, #0x20000\n"
                                 "zero {za}")
    body = []
    for step in range(8):
        a0, a1, b0, b1 = (4 * step + i for i in range(4))
        body += sme.assemble_program("\n".join([
            f"ld1w {{z{a0}.s}}, p0/z, [x0]", f"ld1w {{z{a1}.s}}, p0/z, [x0, #1, mul vl]",
            f"ld1w {{z{b0}.s}}, p0/z, [x1]", f"ld1w {{z{b1}.s}}, p0/z, [x1, #1, mul vl]",
            f"fmopa za0.s, p0/m, p0/m, z{a0}.s, z{b0}.s",
            f"fmopa za1.s, p0/m, p0/m, z{a0}.s, z{b1}.s",
            f"fmopa za2.s, p0/m, p0/m, z{a1}.s, z{b0}.s",
            f"fmopa za3.s, p0/m, p0/m, z{a1}.s, z{b1}.s",
            "add x0, x0, #128", "add x1, x1, #128"]))
    words = np.concatenate([[i.word for i in setup],
                            np.tile([i.word for i in body], steps // 8)]).astype(np.uint32)
    machine = hwsim.machine("sme", mem_size=(64 << 20) + steps * 256)
    rng = np.random.default_rng(0)      # normal fp32 inputs, as in a real GEMM
    machine.memory("mem").write(0x10000, rng.standard_normal(steps * 64).astype(np.float32))
    return machine, SmeProgram(words), len(words)


def hmx_deep_multiply(count: int):
    lines = ["Q6_bias_mxmem2_A(0x3000)"]
    for i in range(count):
        lines += [f"Q6_activation_hf_mxmem_RR_deep({(i % 4) * 0x2000:#x}, "
                  "((4 - 1) << 11) | 0x700 | (31 << 2))",
                  f"Q6_weight_hf_mxmem_RR({0x10000 + (i % 2) * 0x2000:#x}, 2048 * 4 - 1)",
                  "Q6_cvt_hf_acc_R(0)", f"Q6_mxmem_cvt_RR({0x20000 + (i % 4) * 0x800:#x}, 0x700)"]
    machine = hwsim.machine("hmx")
    rng = np.random.default_rng(0)
    machine.memory("vtcm").write(0, (rng.standard_normal(0x20000 // 2) / 8).astype(np.float16))
    program = machine.parse(hmx_isa_lines(lines))
    return machine, program, len(program)


def hmx_isa_lines(lines):
    from hwsim.errors import Location
    return [(text, Location("<bench>", n + 1, 1)) for n, text in enumerate(lines)]


def gap9_ne16_cluster(jobs: int):
    spec = LayerSpec(h_in=8, w_in=8, k_in=16, k_out=32, padding=(1, 1, 1, 1))
    regs = conv_jobs(spec, L1, L1 + 0x4000, L1 + 0xC000, L1 + 0xD000)[0]
    x = TensorRef("l1", L1 + 0x10000, "i8", (64, 32))
    out = TensorRef("l1", L1 + 0x12000, "i8", (64, 32))
    program = Program()
    for n in range(jobs):
        program.dma("l2", 0x1C000000, "l1", L1, 1024)
        program.dma_wait()
        program.ne16_job(regs, wait=True)
        program.cluster("clamp", **{"in": x, "out": out, "min": -3, "max": 9})
        program.cluster("add", a=x, b=out, out=TensorRef("l1", L1 + 0x14000, "i32", (64, 32)))
        program.barrier()
    machine = hwsim.machine("gap9")
    return machine, list(program), len(program)


STREAMS = {"sme_gemm_loop": (sme_gemm_loop, 200_000),
           "hmx_deep_multiply": (hmx_deep_multiply, 2_000),
           "gap9_ne16_cluster": (gap9_ne16_cluster, 200)}


def measure(name: str, engine: str, scale: float, repeat: int) -> dict:
    make, size = STREAMS[name]
    machine, program, instructions = make(max(8, int(size * scale)))
    result = {}

    def once():
        result["run"] = machine.run(program, engine=engine)
    once()                                  # warm-up: numba caches, first-run costs
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
    seconds = min(times)
    run = result["run"]
    ops = sum(u["ops"] for u in run.stats["units"].values())
    return {"stream": name, "engine": engine, "instructions": instructions, "ops": ops,
            "cycles": run.cycles, "wall_s": seconds,
            "instructions_per_s": instructions / seconds, "ops_per_s": ops / seconds}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=["compiled", "simpy"])
    parser.add_argument("--streams", nargs="+", default=list(STREAMS))
    parser.add_argument("--scale", type=float, default=1.0,
                        help="stream length relative to the default")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rows = []
    for name in args.streams:
        for engine in args.engines:
            # the reference twin is measured on a stream 20x shorter: it is one simpy event per op
            scale = args.scale / (20 if engine == "simpy" else 1)
            row = measure(name, engine, scale, args.repeat)
            rows.append(row)
            print(f"{name:<20} {engine:<9} {row['instructions']:>9,} instr {row['cycles']:>11,} "
                  f"cycles {row['wall_s']:8.3f} s {row['instructions_per_s']:12,.0f} instr/s "
                  f"{row['ops_per_s']:12,.0f} ops/s")
    save_rows(RESULTS, rows, ("stream", "engine"), "PYTHONPATH=. python benchmarks/bench_engine.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
