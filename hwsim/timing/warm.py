"""A cold start's second core: compiling in a child process.

The first run after an install (numba's disk cache empty) spends most of its time compiling,
one kernel after the other in one process: the timing core (``core._edges``, ``core._run``
with the traffic model, ``stats._spread``: about 5 s on every machine) and the machine's own
kernels (datapaths, interpreter: 5-10 s). A child process can compile one half while this
process compiles the other, and numba's disk cache hands its work over; on two cores the cold
start then costs about the longer half. Which half goes to the child follows the order in which
this process needs them:

* a machine that runs its program before the timing (SME: ``Machine.in_order``) compiles its
  kernels first, so the child compiles the core (``start_core``, ``python -m
  hwsim.timing.warm``: the core run once on a tiny op table, whose columns have the types of
  every table's, so it compiles the very signatures every run uses); the run waits for it
  (``wait("core")``) before the timing, which then loads the core from the cache. The
  scheduler's core child (``python -m hwsim.schedule.warm core``) also compiles, before the
  core, the exact functions SME's float kernels call (``hwsim.targets.sme.warm``), and after
  it the attribution's kernels;
* the others time the program first and replay its effects after, so this process compiles
  the core (and the scheduler's attribution kernels) and the child the machine's kernels
  (``start("kernels", command)``: the scheduler's child runs a small model on that machine with
  the simpy engine, which needs no core); the replay waits for it (``wait("kernels")``). Where
  the child's half is the longer (HMX), ``start`` takes this process's ``share`` of it, which
  ``wait`` runs first: it compiles kernels from the end of the child's list until the two meet
  (``hwsim.targets.hmx.warm``).

Nothing is started on one core or once the core is in the cache (the sign that the cache is
warm). A child or a share that fails or compiles something else costs only its time: what it
left undone compiles when the run first calls it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Callable

from hwsim.timing import core, stats
from hwsim.timing.optable import OpBuilder, PortSpec, UnitSpec

_lock = threading.Lock()
_child: tuple[str, subprocess.Popen, Callable | None] | None = None


def _cached() -> bool:
    """numba's cache has an index for each of the core's kernels (numba's own check of the
    source's stamp still decides whether an entry is used)."""
    try:
        return all(os.path.exists(kernel._cache._cache_file._index_path)
                   for kernel in (core._run, core._edges, stats._spread))
    except AttributeError:          # another numba's internals: do not guess
        return True


def start(kind: str, command: list[str], share: Callable | None = None) -> bool:
    """Run ``command`` (compiling ``kind``: ``core`` or ``kernels``) as the child, if the cache
    is cold, a second core can run it and no child runs yet; whether it started. ``share(done)``:
    what this process compiles of the child's work before waiting for it, until ``done()``."""
    global _child
    with _lock:
        if _child is not None or (os.cpu_count() or 1) < 2 or _cached():
            return False
        _child = kind, subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL), share
        return True


def start_core() -> None:
    start("core", [sys.executable, "-m", "hwsim.timing.warm"])


def wait(kind: str) -> None:
    """Let a child compiling ``kind`` finish (its work is then in the cache), doing this
    process's share of it meanwhile."""
    global _child
    with _lock:
        if _child is not None and _child[0] == kind:
            _, process, share = _child
            try:
                if share is not None:
                    share(lambda: process.poll() is not None)
            except Exception:       # a failed share only leaves work to compile later
                pass
            finally:
                process.wait()
                _child = None


def compile_core() -> None:
    """Run the core once on a table that uses every column: two units (one decoupled), two
    ports in a group, reads, partial and full writes, transfers (two on each port: a port log's
    columns are strided arrays then, as in every real run, not contiguous ones), a stall and L1
    traffic."""
    b = OpBuilder([UnitSpec("cpu", 2), UnitSpec("dma", 2, in_flight=2)],
                  [PortSpec("a", 8.0, 2), PortSpec("b", 4.0, 1)], groups=[(0, 1)],
                  traffic_banks=16)
    b.add("cpu", 2, 1, writes=["r"], traffic=("pay", "core0", {4: 2}))
    b.add("dma", 1, 0, reads=["r"], parts=["m"], transfers=[(-1, 64)], stall=("setup", 3),
          traffic=("record", "dma", 16, 4.0))
    b.add("cpu", 1, 0, reads=["m"], writes=["r"], transfers=[(1, 8), (0, 8), (1, 4)])
    stats.collect(core.simulate(b.table()), "warm", 3, 1.0, 1e9, 256)


if __name__ == "__main__":
    compile_core()
