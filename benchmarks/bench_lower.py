"""How fast the SME lowering writes programs: seconds and nanoseconds per instruction.

    PYTHONPATH=. python benchmarks/bench_lower.py [--repeat 3] [--cases matmul_512 ...]

For each case, ``lower_s`` is the time of the lowering step alone (``Lowering.lower``: tensors
placed, weights packed, every instruction written) and ``prepare_s`` the whole of
``hwsim.schedule.prepare`` (load the model, check, fuse, lower); ``ns_per_instruction`` divides
``lower_s`` by the program's length. Cases: a 512 x 512 x 512 fp32 MATMUL (B a constant) and the
MLPerf Tiny models in ../shared/models (int8 files in the int8 mode, fp32 files in the fp32 mode;
their synthetic look-alikes when the files are absent). Each figure is the best of ``--repeat``
timings of this process's CPU time after one warm-up call (robust on a shared machine);
``first_lower_s`` is that first call, before the lowering's caches (instruction encodings, GEMM
block bodies by shape) hold anything of this case.

Results are printed and saved in benchmarks/results/lower.json; a run replaces the rows of the
cases it measured and keeps the others.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from hwsim.schedule import _machine, lowering, prepare  # noqa: E402
from hwsim.tosa import load_graph  # noqa: E402
from hwsim.tosa.models import model  # noqa: E402
from bench_gemm import matmul_graph  # noqa: E402
from common import MLPERF_TINY, best, save_rows  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "lower.json"
MODELS = ROOT.parent / "shared" / "models"
FLOAT_MODELS = {"resnet8_fp32": "resnet8", "ad01_fp32": "autoencoder"}


def cases() -> dict:
    """name -> (graph, mode)."""
    rng = np.random.default_rng(0)
    out = {"matmul_512": (matmul_graph(512, 512, 512, "fp32",
                                       rng.standard_normal((512, 512)).astype(np.float32)),
                          "fp32")}
    for files, dtype, mode in ((MLPERF_TINY, "int8", "int8"), (FLOAT_MODELS, "fp32", "fp32")):
        for stem, synthetic in files.items():
            path = MODELS / f"{stem}.tflite"
            out[stem] = (load_graph(path) if path.exists() else model(synthetic, dtype=dtype),
                         mode)
    return out


def measure(name: str, graph, mode: str, repeat: int) -> dict:
    low = lowering("sme")
    options = low.options(mode)
    machine, _ = _machine(low, options.params)
    layers = low.layers(graph, options)
    start = time.process_time()
    lowered = low.lower(graph, layers, machine, options)
    first_s = time.process_time() - start
    lower_s = best(lambda: low.lower(graph, layers, machine, options), repeat,
                   clock=time.process_time, warm_up=False)
    prepare_s = best(lambda: prepare(graph, "sme", mode), repeat, clock=time.process_time)
    count = len(lowered.program)
    return {"case": name, "mode": mode, "instructions": count, "layers": len(layers),
            "first_lower_s": first_s, "lower_s": lower_s, "prepare_s": prepare_s,
            "ns_per_instruction": lower_s / count * 1e9}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", nargs="*")
    args = parser.parse_args(argv)
    rows = []
    for name, (graph, mode) in cases().items():
        if args.cases and name not in args.cases:
            continue
        row = measure(name, graph, mode, args.repeat)
        rows.append(row)
        print(f"{name:14} {mode:5} {row['instructions']:>9,} instructions: lower "
              f"{row['lower_s'] * 1e3:7.1f} ms ({row['ns_per_instruction']:6.1f} ns each; first "
              f"{row['first_lower_s'] * 1e3:.1f} ms), prepare {row['prepare_s'] * 1e3:.1f} ms",
              flush=True)
    save_rows(RESULTS, rows, ("case",), "PYTHONPATH=. python benchmarks/bench_lower.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
