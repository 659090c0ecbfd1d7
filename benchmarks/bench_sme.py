"""Speed of the SME machine: the engine, the compiled interpreter, and the outer-product kernels.

    PYTHONPATH=. python benchmarks/bench_sme.py      # prints a table, writes results/sme.json

* engine: simulated instructions per second of whole runs (``Machine.run`` on an assembled
  program, statistics on, timeline off) for an fp32 GEMM inner loop (4 loads, 4 FMOPA, 2 adds per
  step), an FMOPA-only stream and a scalar-only stream;
* interpreter: instructions per second of ``interpreter.Runner.run`` (functional semantics only, no
  timing) on the same GEMM loop, with numerics on and off, and on a whole 512x512x512 fp32 GEMM
  at SVL 512 (1.3 M instructions: 256 blocks of 32x32, each 512 steps of the loop and the stores
  of its four tiles), with the time to ``decode`` it;
* kernels: nanoseconds per outer product of each kernel as the interpreter calls it (compiled,
  from a numba loop, tiles at SVL 512 and 2048), against a plain float32 outer product of the
  same tile (numba, and numpy), for FMOPA fp32, non-widening BFMOPA (.H: four times the
  elements), widening BFMOPA (EBF=0, round to odd) and FMOPA (FP16), and SMOPA.

Each figure is the best of ``REPEATS`` timings of this process's CPU time (robust on a shared
machine), after a warm-up run that loads the numba caches.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

import numba

import hwsim
from hwsim.isa import sme
from hwsim.targets.sme import interpreter, kernels, numerics
from hwsim.targets.native import pointer
from hwsim.targets.sme.program import Builder, SmeProgram
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
        seconds = best(lambda: m.run(program), 3, time.process_time)
        rates[name] = len(program) / seconds
    return rates


def _values(rng, n, fmt, dtype):
    e, mb = fmt
    bias = (1 << (e - 1)) - 1
    return ((rng.integers(0, 2, n) << (e + mb)) | (rng.integers(bias - 3, bias + 3, n) << mb)
            | rng.integers(0, 1 << mb, n)).astype(dtype)


def _interpret(machine, program, numerics_on=True) -> float:
    """CPU seconds of one interpreted run of ``program``."""
    decoded = interpreter.decode(program.words)
    moved = np.zeros(len(program), np.int64)
    runner = interpreter.Runner(machine.state, program, decoded, numerics_on, machine.params,
                                moved)
    return best(lambda: runner.run(0, len(program)), 3, time.process_time)


def interpreter_rates(steps: int = 20000) -> dict[str, float]:
    program = SmeProgram.from_items(programs(steps)["gemm_fp32_loop"])
    rates = {}
    for on in (True, False):
        m = hwsim.machine("sme", mem_size=64 << 20)
        rng = np.random.default_rng(0)   # normal fp32 inputs under both streams, as in a GEMM
        m.memory("mem").write(0x10000, rng.standard_normal(steps * 32 + 0x4000).astype(
            np.float32))
        rates[f"gemm_fp32_loop_numerics_{'on' if on else 'off'}"] = len(program) / _interpret(
            m, program, on)
    return rates


def _mov(register: int, value: int) -> list[int]:
    return [ins.word for ins in sme.parse_line(f"mov x{register}, #{value:#x}")]


def gemm_program(size: int = 512, a_at: int = 0x100000, b_at: int = 0x500000,
                 c_at: int = 0x900000) -> SmeProgram:
    """C = A B (size^3, fp32, SVL 512) as arrays: A in 32-row panels stored K-major (row k of panel
    p: A[32p:32p+32, k]), B in 32-column panels the same way, C row-major. Each 32x32 block of C:
    four .S tiles, ``size`` steps of 4 loads, 4 FMOPA and 2 adds, then its 64 tile rows stored."""
    step = [sme.assemble(t) for t in (
        "ld1w {z0.s}, p0/z, [x0]", "ld1w {z1.s}, p0/z, [x0, #1, mul vl]",
        "ld1w {z2.s}, p0/z, [x1]", "ld1w {z3.s}, p0/z, [x1, #1, mul vl]",
        "fmopa za0.s, p0/m, p0/m, z0.s, z2.s", "fmopa za1.s, p0/m, p0/m, z0.s, z3.s",
        "fmopa za2.s, p0/m, p0/m, z1.s, z2.s", "fmopa za3.s, p0/m, p0/m, z1.s, z3.s",
        "add x0, x0, #128", "add x1, x1, #128")]
    store = []
    for t in range(4):     # tile t holds C[16(t//2):..., 16(t%2):...] of the block
        for row in range(16):
            store += _mov(12, row) + _mov(2, (16 * (t // 2) + row) * size + 16 * (t % 2))
            store.append(sme.assemble(f"st1w {{za{t}h.s[w12, 0]}}, p0, [x3, x2, lsl #2]"))
    builder = Builder()
    builder.words([sme.assemble("smstart"), sme.assemble("ptrue p0.s")])
    blocks = size // 32
    for bi in range(blocks):
        for bj in range(blocks):
            builder.words([sme.assemble("zero {za}")] + _mov(0, a_at + bi * 128 * size)
                          + _mov(1, b_at + bj * 128 * size)
                          + _mov(3, c_at + 4 * (32 * bi * size + 32 * bj)))
            builder.words(np.tile(np.array(step, np.uint32), size))
            builder.words(store)
    return builder.program()


def gemm_512() -> dict[str, float]:
    size = 512
    rng = np.random.default_rng(2)
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    start = time.process_time()
    program = gemm_program(size)
    build = time.process_time() - start
    decode = best(lambda: interpreter.decode(program.words), 3, time.process_time)
    m = hwsim.machine("sme", svl=512, mem_size=16 << 20)
    mem = m.memory("mem")
    mem.write(0x100000, a.reshape(size // 32, 32, size).transpose(0, 2, 1).copy())
    mem.write(0x500000, b.reshape(size, size // 32, 32).transpose(1, 0, 2).copy())
    seconds = {on: _interpret(m, program, on) for on in (False, True)}
    c = mem.read(0x900000, 4 * size * size).view(np.float32).reshape(size, size)
    want = a.astype(np.float64) @ b.astype(np.float64)
    return {"instructions": len(program), "build_s": build, "decode_s": decode,
            "run_s_numerics_on": seconds[True], "run_s_numerics_off": seconds[False],
            "instructions_per_second_numerics_on": len(program) / seconds[True],
            "instructions_per_second_numerics_off": len(program) / seconds[False],
            "max_rel_err": float(np.abs(c - want).max() / np.abs(want).max())}


@numba.njit
def _plain_loop(calls, za, zn, zm):
    """A float32 outer product into tile t of ZA (rows t, t+4, ...), as FMOPA .S updates it."""
    dim = za.shape[1]
    for k in range(calls):
        t = k & 3
        for i in range(dim):
            for j in range(dim):
                za[4 * i + t, j] += zn[i] * zm[j]


@numba.njit
def _kernel_loop(calls, kernel, exact, za, z, p, ctl, words, svl, tiles, variant):
    """The kernel as the interpreter calls it: by address, on the machine's storage."""
    for k in range(calls):
        kernels.call_outer(kernel, (pointer(za.ctypes.data), pointer(z.ctypes.data),
                                    pointer(p.ctypes.data), pointer(ctl.ctypes.data),
                                    pointer(words.ctypes.data), svl, k % tiles, 1, 2, 0, 0, 0,
                                    variant, exact))


def kernel_costs() -> dict[str, float]:
    """Nanoseconds per outer product (one instruction's tile update)."""
    rng = np.random.default_rng(1)
    ctl = numerics.controls(0, True, "pseudocode")
    costs = {}
    for svl in (512, 2048):
        n = svl // 8
        dim = n // 4
        calls = max(2000, 2_000_000 // (dim * dim))
        za = rng.standard_normal((n, dim)).astype(np.float32) / 8
        zn, zm = (rng.standard_normal(dim).astype(np.float32) / 8 for _ in range(2))
        costs[f"plain_float32_numba_svl{svl}"] = best(
            lambda: _plain_loop(calls, za, zn, zm), REPEATS, time.process_time) / calls * 1e9
        tile = za[::4]
        numpy_calls = calls // 10
        costs[f"plain_float32_numpy_svl{svl}"] = best(
            lambda: [np.add(tile, np.multiply.outer(zn, zm), out=tile)
                     for _ in range(numpy_calls)], REPEATS, time.process_time) / numpy_calls * 1e9
        p = np.ones((16, n), bool)
        words = kernels.scratch(n)
        cases = {"fmopa_fp32": ("fp32", (8, 23), 4, "fma", 0),
                 "bfmopa_nonwidening": ("bf16", (8, 7), 2, "fma", 0),
                 "bfmopa_widening": ("bf16_wide", (8, 7), 2, "sop", 2),
                 "fmopa_widening_fp16": ("fp16_wide", (5, 10), 2, "dot", 0),
                 "smopa_int8": ("int8", None, 1, "fma", 0)}
        for name, (dtype, fmt, ssize, exact, variant) in cases.items():
            tsize = 2 if dtype == "bf16" else 4
            za = np.zeros((n, n), np.uint8)
            z = rng.integers(0, 256, (32, n)).astype(np.uint8)
            if fmt:
                za.view(np.uint16 if tsize == 2 else np.uint32)[...] = _values(
                    rng, n * n // tsize, fmt if tsize == 2 else (8, 23),
                    np.uint16 if tsize == 2 else np.uint32).reshape(n, -1)
                z.view(np.uint16 if ssize == 2 else np.uint32)[...] = _values(
                    rng, 32 * n // ssize, fmt, np.uint16 if ssize == 2 else np.uint32).reshape(
                    32, -1)
            kernel, function = kernels.outer(dtype).address, kernels.exact(exact).address
            seconds = best(lambda: _kernel_loop(calls, kernel, function, za, z, p, ctl, words, n,
                                                tsize, variant), REPEATS, time.process_time)
            costs[f"{name}_svl{svl}"] = seconds / calls * 1e9
    return costs


def main() -> None:
    results = {"engine_instructions_per_second": engine_rates(),
               "interpreter_instructions_per_second": interpreter_rates(),
               "interpreter_gemm_512_fp32": gemm_512(),
               "kernel_ns_per_outer_product": kernel_costs()}
    for group, values in results.items():
        print(group)
        for name, value in values.items():
            print(f"  {name:<40} {value:12.3g}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print("wrote", RESULTS)


if __name__ == "__main__":
    main()
