"""GAP9 speed: NE16 datapath MACs per second (bit-exact) and engine ops per second.

    PYTHONPATH=. python benchmarks/bench_gap9.py

Measures (best of a few repeats, after a warm-up that compiles the numba kernels):

* ``ne16_gemm_macs_per_s``: the 32-bit wrapping inner-product kernel on one 3x3 layer's
  patches (the arithmetic alone), checked against its numpy twin;
* ``ne16_job_macs_per_s``: a whole job functionally as the machine runs it (the compiled
  datapath ``ne16.kernel``: input patches from L1 through the streamer addresses, products,
  normquant, stores; its weights decoded once), checked bit-exactly against the independent
  reference of the tests; ``ne16_job_twin_macs_per_s`` the same job through the numpy twin
  (``ne16.datapath.run_job``: gathers, bit-plane unpacking, products, normquant, scatter);
* ``engine_ops_per_s``: simulated ops (one per NE16 state, controller and DMA instruction) per
  second of a full run, and the cycles simulated per second.

Prints a table and writes ``benchmarks/results/gap9.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import hwsim                                                                   # noqa: E402
from hwsim.isa import ne16 as isa                                              # noqa: E402
from hwsim.isa.gap9 import Program                                             # noqa: E402
from hwsim.memory.space import AddressSpace                                    # noqa: E402
from hwsim.targets.gap9.ne16 import kernel as ne16_kernel                      # noqa: E402
from hwsim.targets.gap9.ne16 import layout                                     # noqa: E402
from hwsim.targets.gap9.ne16.datapath import gemm_wrap32, gemm_wrap32_np, run_job  # noqa: E402
from hwsim.targets.gap9.ne16.driver import LayerSpec, conv_jobs                # noqa: E402
from hwsim.targets.gap9.ne16.job import Ne16Job                                # noqa: E402
from tests import gap9_oracle as oracle                                        # noqa: E402
from common import best  # noqa: E402

L1 = 0x10000000
LAYER = LayerSpec(h_in=16, w_in=16, k_in=128, k_out=64, padding=(1, 1, 1, 1), shift=16,
                  relu=True)                    # 32 KB in, 72 KB weights, 16 KB out: fits L1


def layer_in_l1(spec: LayerSpec, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (spec.h_in, spec.w_in, spec.k_in)).astype(np.uint8)
    w = rng.integers(-128, 128, (spec.k_out, spec.k_in, 3, 3))
    l1 = AddressSpace("l1", 128 << 10, L1)
    l1.write(L1, x)
    l1.write(L1 + 0x8000, layout.pack_conv_weights(layout.to_unsigned(w, 8), 8))
    l1.write(L1 + 0x1A000, layout.pack_scale(np.arange(1, spec.k_out + 1), 8))
    regs = conv_jobs(spec, L1, L1 + 0x1B000, L1 + 0x8000, L1 + 0x1A000)[0]
    job = Ne16Job(tuple(regs.get(r.name, 0) for r in isa.REGISTERS))
    return l1, job, x, w


def bench_gemm() -> dict:
    rng = np.random.default_rng(1)
    m, n, k = 6 * 6 * 9, 8 * 144, 64            # the 16x16x128 -> 64 3x3 layer's patches
    x = rng.integers(0, 256, (m, n)).astype(np.uint8)
    w = rng.integers(-(1 << 31), 1 << 31, (k, n)).astype(np.int32)
    assert np.array_equal(gemm_wrap32(x, w), gemm_wrap32_np(x, w))
    seconds = best(lambda: gemm_wrap32(x, w))
    return {"ne16_gemm_macs_per_s": m * n * k / seconds}


def bench_job() -> dict:
    l1, job, x, w = layer_in_l1(LAYER)
    acc = oracle.conv(x[:5, :5], w, padding=(1, 1, 1, 1))[:4, :4]    # a corner, for time
    want = oracle.normquant(acc, np.arange(1, 65), None, 16, True, 8)
    twin = AddressSpace("l1", l1.size, l1.base)
    twin.data[:] = l1.data
    offsets, data = run_job(job, twin)
    twin.data[offsets] = data
    ne16_kernel.start(job, l1)()
    for space in (l1, twin):
        got = space.data[0x1B000:0x1B000 + 16 * 16 * 64].reshape(16, 16, 64)
        assert np.array_equal(got[:4, :4], want)
    assert np.array_equal(l1.data, twin.data)
    compiled = best(lambda: ne16_kernel.start(job, l1)())
    numpy = best(lambda: run_job(job, l1))
    return {"ne16_job_macs_per_s": job.macs / compiled,
            "ne16_job_twin_macs_per_s": job.macs / numpy, "ne16_job_macs": job.macs}


def bench_engine() -> dict:
    """Many states, little arithmetic: 8 jobs of a 32x32x16 -> 32 layer with DMA traffic."""
    spec = LayerSpec(h_in=32, w_in=32, k_in=16, k_out=32, padding=(1, 1, 1, 1), weight_bits=4)
    regs = conv_jobs(spec, L1, L1 + 0x4000, L1 + 0xC000, L1 + 0xD000)[0]
    program = Program()
    for _ in range(8):
        program.dma("l2", 0x1C000000, "l1", L1 + 0x10000, 4096)
        program.ne16_job(regs)
    program.ne16_wait()
    program.dma_wait()
    machine = hwsim.machine("gap9")
    result = {}

    def once():
        result["run"] = machine.run(program)
    seconds = best(once, repeats=3)
    ops = sum(u["ops"] for u in result["run"].stats["units"].values())
    return {"engine_ops_per_s": ops / seconds, "engine_ops": ops,
            "simulated_cycles_per_s": result["run"].cycles / seconds}


def main() -> None:
    results = {**bench_gemm(), **bench_job(), **bench_engine()}
    for key, value in results.items():
        print(f"{key:<26} {value:>14.4g}")
    out = ROOT / "benchmarks" / "results" / "gap9.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
