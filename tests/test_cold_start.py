"""Cold start: with an empty numba cache, the usual paths compile each shared helper once and
leave the rare exact paths uncompiled (docs/hmx-datapath-speed.md, Cold start).

Each case runs in a fresh interpreter with its own empty cache, so that the signatures it lists
are the compiles that interpreter made, whatever this process or the disk cache holds.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

_HMX = """
    import numpy as np
    from hwsim.targets import floats
    from hwsim.targets.hmx import hvx_kernels as K, numerics as N
    acc = np.full((32, 32), (63 << 29) | 12345, np.uint64)          # normal, near 1.0
    fields = [np.full(32, v, np.int64) for v in (0, 0, 0x3C000, 0)]  # b_i 0, x, s 1.0, b_o 0
    prev, out = np.zeros((32, 32), np.uint32), np.zeros((32, 32), np.uint32)
    N.convert(acc, *fields, prev, out, N.shape_table("abs"), 0, 0, 0, 0, 0, 0, 7, 29)
    a = np.arange(0x3C00, 0x3C40, dtype=np.uint16)
    K.fp16_binary(a, a, np.empty_like(a), False)
    K.f32_to_f16(np.ones(4, np.float32).view(np.uint32), np.empty(4, np.uint16))
    K.f16_to_f32(a, np.empty(a.size, np.uint32))
    functions = {"convert_rest": N.convert_rest, "binary_rest": K._binary_rest,
                 "round_pack": floats.round_pack, "unpack": floats.unpack,
                 "decode": N.decode, "limit": N.limit}
"""

_SME = """
    from hwsim.targets.sme import kernels, numerics
    kernels.outer("fp32"), kernels.exact("fma")
    functions = {"fma": numerics.fma, "dot_add": numerics.dot_add,
                 "bf16_dot_add": numerics.bf16_dot_add}
"""


def _signatures(code: str, tmp_path) -> dict:
    script = textwrap.dedent(code) + textwrap.dedent("""
        import json
        print(json.dumps({k: len(f.signatures) for k, f in functions.items()}))
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow
def test_hmx_usual_paths_compile_each_helper_once_and_no_exact_path(tmp_path):
    assert _signatures(_HMX, tmp_path) == {"convert_rest": 0, "binary_rest": 0, "round_pack": 1,
                                           "unpack": 1, "decode": 1, "limit": 1}


@pytest.mark.slow
def test_sme_fp32_kernel_calls_its_exact_function_by_address_only(tmp_path):
    # the kernel compiles no copy of fma (nor the widening functions); exact("fma") compiles one
    assert _signatures(_SME, tmp_path) == {"fma": 1, "dot_add": 0, "bf16_dot_add": 0}


@pytest.mark.slow
def test_the_cold_start_children_compile_what_a_run_then_loads(tmp_path):
    """On an empty cache, the core child's tiny table compiles the signatures a real run uses
    (the run then loads them: no cache miss), and the kernels child runs."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    subprocess.run([sys.executable, "-m", "hwsim.timing.warm"], env=env, check=True)
    subprocess.run([sys.executable, "-m", "hwsim.schedule.warm", "gap9", "cluster", "int8"],
                   env=env, check=True)
    script = textwrap.dedent("""
        import json
        from hwsim.schedule import estimate
        from hwsim.timing import core, stats, warm
        from hwsim.tosa.models import model
        assert warm._cached()
        estimate(model("autoencoder", dtype="int8"), "gap9", mode="cluster")
        print(json.dumps({f.__name__: [len(f.signatures), sum(f.stats.cache_misses.values())]
                          for f in (core._run, core._edges, stats._spread)}))
    """)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, check=True)
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["_run"] == found["_edges"] == [1, 0] and found["_spread"][1] == 0


@pytest.mark.slow
def test_a_timing_only_run_starts_no_kernels_child(tmp_path):
    """A timing-only run calls no kernel, so a cold start compiles none in a child; SME's core
    child still runs (it compiles what every run needs)."""
    script = textwrap.dedent("""
        from hwsim.schedule import _warm_up
        from hwsim.timing import warm
        from hwsim.tosa.models import model
        graph = model("autoencoder", dtype="int8")
        assert not warm._cached()
        _warm_up("gap9", "exact", graph, program_first=False, numerics=False)
        assert warm._child is None
        _warm_up("sme", "int8", graph, program_first=True, numerics=False)
        assert warm._child[0] == "core"
        warm.wait("core")
        assert warm._child is None and warm._cached()
    """)
    subprocess.run([sys.executable, "-c", script], check=True,
                   env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)))


@pytest.mark.slow
@pytest.mark.parametrize("mode, dtype", [("dequantise", "int8"), ("fp16", "fp32")])
def test_hmx_share_compiles_what_the_kernels_child_then_loads(tmp_path, mode, dtype):
    """The run's share of HMX's kernels (``hmx.warm.compile_late``) compiles the very signatures
    the kernels child's DS-CNN calls, so the child loads every one of them and compiles none
    again, then those a model may need that the DS-CNN does not call; once the child has been
    there, the share stops at its first kernel."""
    share = textwrap.dedent(f"""
        import json
        from hwsim.targets.hmx.warm import compile_late
        from hwsim.schedule.check import PASSES
        print(json.dumps(compile_late({mode!r}, lambda: False, PASSES)))
    """)
    child = textwrap.dedent(f"""
        import json, runpy, sys
        from hwsim.targets.hmx.warm import _calls, _extras
        from hwsim.schedule.check import PASSES
        sys.argv = ["warm", "hmx", {mode!r}, {dtype!r}]
        runpy.run_module("hwsim.schedule.warm", run_name="__main__")
        print(json.dumps({{kernel.__name__: [sum(kernel.stats.cache_misses.values()),
                                             sum(kernel.stats.cache_hits.values())]
                           for kernel, _ in _calls({mode!r}) + _extras({mode!r}) + list(PASSES)}}))
    """)

    def run(script):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              check=True, env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)))
        return json.loads(done.stdout.splitlines()[-1])

    kernels = ["_reformat", "fp16_recip", "fp16_reduce_sum", "fp16_exp", "_binary_usual",
               "fp16_reduce_max", "fp16_avg_pool", "fp16_clamp", "unpack_act", "crouton_of_cvt"]
    # the convert applies the ReLUs: the DS-CNN calls no clamp in fp16 mode, nor an exact HVX
    # add in dequantise mode (KWS does), nor the check's compiled passes (it runs no check)
    extras = ["fp16_clamp" if mode == "fp16" else "_binary_rest", "_depthwise_sums",
              "_ulp_errors", "_dot_errors"]
    if mode == "fp16":
        kernels = ["convert_rest"] + [k for k in kernels if k != "fp16_clamp"] + extras
    else:
        kernels = ["convert_usual"] + kernels + extras
    assert run(share) == kernels
    # _reformat: the child compiles its other signature (FP32 -> FP16) itself
    assert run(child) == {name: [int(name == "_reformat"), int(name not in extras)]
                          for name in kernels}
    assert run(share) == []


@pytest.mark.slow
def test_an_hmx_run_takes_a_share_of_the_kernels_child_and_a_gap9_run_none(tmp_path):
    script = textwrap.dedent("""
        from hwsim.schedule import _warm_up
        from hwsim.timing import warm
        from hwsim.tosa.models import model
        graph = model("autoencoder", dtype="int8")
        for target, mode, share in (("hmx", "dequantise", True), ("gap9", "exact", False)):
            _warm_up(target, mode, graph, program_first=False, numerics=True)
            assert warm._child[0] == "kernels" and (warm._child[2] is not None) == share
            warm._child[1].kill()
            warm._child[1].wait()
            warm.wait("kernels")            # the share sees the child has ended: no compile
            assert warm._child is None
    """)
    subprocess.run([sys.executable, "-c", script], check=True,
                   env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)))


def test_waiting_for_the_kernels_child_runs_the_share_until_the_child_ends(tmp_path):
    script = textwrap.dedent("""
        import sys, time
        from hwsim.timing import warm
        polls = []
        def share(done):
            while not done():
                polls.append(time.monotonic())
                time.sleep(0.05)
        assert warm.start("kernels", [sys.executable, "-c", "import time; time.sleep(0.5)"],
                          share)
        start = time.monotonic()
        warm.wait("kernels")
        assert warm._child is None and len(polls) > 2 and time.monotonic() - start >= 0.4
    """)
    subprocess.run([sys.executable, "-c", script], check=True,
                   env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)))


def test_a_failing_share_still_waits_for_the_child_and_does_not_fail_the_run(tmp_path):
    script = textwrap.dedent("""
        import sys, time
        from hwsim.timing import warm
        def share(done):
            raise TypeError("a kernel's signature changed")
        assert warm.start("kernels", [sys.executable, "-c", "import time; time.sleep(0.3)"],
                          share)
        start = time.monotonic()
        warm.wait("kernels")
        assert warm._child is None and time.monotonic() - start >= 0.2
    """)
    subprocess.run([sys.executable, "-c", script], check=True,
                   env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)))


@pytest.mark.slow
def test_sme_core_child_compiles_the_exact_functions_the_run_then_loads(tmp_path):
    """In each mode the core child compiles the exact functions the run calls (in int8 mode
    the pack kernel: ``hwsim.targets.sme.warm``) and the attribution's kernels; the run, which
    compiles its loop before its kernels, then loads all of them and compiles none again (but
    for a float mode's pack kernel, which the run compiles)."""
    script = textwrap.dedent("""
        import json, sys
        from numba.core.ccallback import CFunc
        from hwsim.schedule import estimate, run
        from hwsim.targets.sme import interpreter, layouts
        from hwsim.timing import core, stats
        from hwsim.tosa.models import model
        cfuncs, compile = [], CFunc.compile
        def record(self):          # name, loaded, whether the loop was compiled by then
            hits = self.cache_hits
            compile(self)
            cfuncs.append([self._pyfunc.__name__, self.cache_hits > hits,
                           len(interpreter.execute.signatures)])
        CFunc.compile = record
        mode = sys.argv[1]
        estimate(model("autoencoder", dtype="int8" if mode == "int8" else "fp32"), "sme",
                 mode=mode)
        print(json.dumps({
            "exact": [c for c in cfuncs if c[0].startswith("_exact")],
            "misses": {f.__name__: sum(f.stats.cache_misses.values())
                       for f in (core._run, core._edges, stats._spread, run._runs, run._swept,
                                 layouts._conv_panels)},
            "packed": len(layouts._conv_panels.signatures)}))
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    names = {"bf16-widening": ["_exact_sop"], "bf16": ["_exact_fma"], "fp32": ["_exact_fma"],
             "int8": []}
    for mode, name in names.items():
        subprocess.run([sys.executable, "-m", "hwsim.schedule.warm", "core", mode], env=env,
                       check=True)
        done = subprocess.run([sys.executable, "-c", script, mode], env=env,
                              capture_output=True, text=True, check=True)
        found = json.loads(done.stdout.splitlines()[-1])
        packs = found["misses"].pop("_conv_panels")
        assert found == {"exact": [[n, True, 1] for n in name],
                         "misses": {"_run": 0, "_edges": 0, "_spread": 0, "_runs": 0,
                                    "_swept": 0}, "packed": 1}, mode
        assert packs == 0 or mode != "int8"


@pytest.mark.slow
def test_an_sme_run_gives_its_core_child_its_mode_unless_timing_only(tmp_path):
    script = textwrap.dedent("""
        from hwsim.schedule import _warm_up
        from hwsim.timing import warm
        from hwsim.tosa.models import model
        graph = model("autoencoder", dtype="fp32")
        for mode, numerics, args in (("bf16-widening", True, ["bf16-widening"]),
                                     ("int8", True, ["int8"]), ("fp32", False, [])):
            _warm_up("sme", mode, graph, program_first=True, numerics=numerics)
            assert warm._child[0] == "core" and warm._child[1].args[-len(args) - 1:] == [
                "core", *args], mode
            warm._child[1].kill()
            warm._child[1].wait()
            warm.wait("core")
    """)
    subprocess.run([sys.executable, "-c", script], check=True,
                   env=dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path)))


def test_the_checks_passes_compile_the_signatures_a_check_then_loads(tmp_path):
    """``check.compile_passes`` (a cold start's spare time) compiles every compiled pass of a
    float check with the argument types the check passes, so a check after it loads them all
    and compiles none: here the fp64 references of a depthwise convolution (its bias would be
    a read-only array, another signature, if passed as broadcast) and the verdicts' errors."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    subprocess.run([sys.executable, "-c", "from hwsim.schedule.check import compile_passes; "
                    "compile_passes()"], env=env, check=True)
    script = textwrap.dedent("""
        import json
        import numpy as np
        from hwsim.schedule.check import PASSES
        from hwsim.tosa import fp64
        from hwsim.tosa.builder import GraphBuilder
        from hwsim.tosa.judge import judge
        b = GraphBuilder()
        x = b.input((1, 5, 5, 4), "fp32")
        out = b.depthwise_conv2d(x, b.const(np.ones((3, 3, 4, 1)), "fp32"),
                                 b.const(np.ones(4), "fp32"), pad=(1, 1, 1, 1))
        op = b.build(out).operators[-1]
        values = np.random.default_rng(0).standard_normal((1, 5, 5, 4)).astype(np.float32)
        ref, bnd = fp64.reference(op, {x.name: values})
        sim = (ref * (1 + 2.0 ** -20)).astype(np.float32)
        judge(op, sim, ref.astype(np.float32), ref64=ref, bnd64=bnd, x=values)
        print(json.dumps({k.__name__: [sum(k.stats.cache_misses.values()),
                                       sum(k.stats.cache_hits.values())] for k, _ in PASSES}))
    """)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, check=True)
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "_depthwise_sums": [0, 1], "_ulp_errors": [0, 1], "_dot_errors": [0, 1]}
