"""Reference-model runs in a second process, beside the simulation.

The reference model's Python binding holds the GIL while it runs, so in a thread it would only
take turns with the simulator. ``submit`` hands a run to a worker process instead: a check
submits the runs that need only the model input before the lowering and picks them up after
the simulation, by when they are usually done (``hwsim.schedule.check.begin``).

The worker (``python -m hwsim.tosa.background``, so that nothing of the user's ``__main__``
runs again in it) starts at the first submission and is kept for the life of the process; it
runs its jobs one at a time, in order. A job (the graph pickled, which is cheaper than writing
its flatbuffer; the worker writes that) and its result cross as files in a private folder (in
memory where ``/dev/shm`` exists), and the pipes carry only their numbers: neither side ever
waits for the other to read, and the simulation, which holds the GIL, is never slowed by a
thread feeding a pipe.

A job the worker has not started when its result is asked for is taken back and run here,
and one whose result nobody will ask for is dropped (``_Worker.steal``: whichever side first
renames or removes its file has it): this process never waits for work queued in the worker.

The worker's start, about 0.2 s, is never waited for: a run submitted before the worker is up
happens in this process, when its result is first asked for. There is no worker without a
second CPU, in a daemonic process (e.g. a Dask worker's), or with ``HWSIM_REFERENCE_WORKER=0``.
If the worker dies, its runs and all later ones happen in this process; a child made by
``fork`` leaves its parent's worker alone. Either way the results are the same: the same
reference model runs the same flatbuffer on the same inputs, and a ``ReferenceError`` carries
the same message.
"""

from __future__ import annotations

import atexit
import itertools
import multiprocessing
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from hwsim.tosa import reference
from hwsim.tosa.flatbuf import write_tosa
from hwsim.tosa.ir import Graph


def _dump(path: Path, value) -> None:
    with open(path, "wb") as fh:
        pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)


def _take(path: Path):
    """The value in ``path``, which is then removed."""
    with open(path, "rb") as fh:
        value = pickle.load(fh)
    path.unlink()
    return value


class _Worker:
    """The worker process, the folder of its jobs and results, and the pipes of their numbers
    (module docstring)."""

    def __init__(self):
        shm = Path("/dev/shm")
        self.folder = Path(tempfile.mkdtemp(prefix="hwsim-reference-",
                                            dir=shm if shm.is_dir() else None))
        down_r, down_w = os.pipe()      # job numbers to the worker
        up_r, up_w = os.pipe()          # "ready", then the numbers of finished jobs
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "hwsim.tosa.background", str(self.folder), str(down_r),
                 str(up_w)], pass_fds=(down_r, up_w), stdin=subprocess.DEVNULL)
        except OSError:
            for fd in (down_r, down_w, up_r, up_w):
                os.close(fd)
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        os.close(down_r)
        os.close(up_w)
        self.jobs = Connection(down_w, readable=False)
        self.answers = Connection(up_r, writable=False)
        self.numbers = itertools.count()
        self.finished: set[int] = set()     # answers read while waiting for another
        self.abandoned: set[int] = set()    # jobs whose results nobody will ask for
        self.up = self.broken = self.inherited = False
        self.lock = threading.RLock()    # re-entrant: a Pending may be dropped while it is held
        atexit.register(self.close)

    def ready(self) -> bool:
        """Whether the worker is up (its "ready" has come), without waiting."""
        with self.lock:
            if not self.up and not self.broken:
                try:
                    if self.answers.poll():
                        self.up = self.answers.recv() == "ready"
                except (EOFError, OSError):
                    self.broken = True
            return self.up and not self.broken

    def submit(self, payload) -> int | None:
        """The job's number, or None if the worker cannot take it."""
        with self.lock:
            if self.broken:
                return None
            number = next(self.numbers)
            path = self.folder / f"job-{number}"
            try:
                _dump(path, payload)
            except (pickle.PicklingError, TypeError, AttributeError):   # run it here
                path.unlink(missing_ok=True)
                return None
            try:
                self.jobs.send(number)
            except OSError:                 # the worker is gone
                self.broken = True
                path.unlink(missing_ok=True)
                return None
            return number

    def answered(self, number: int) -> bool:
        """Whether job ``number``'s result is written (reading the answers that have come,
        without waiting)."""
        with self.lock:
            if not self.ready():
                return False
            try:
                while number not in self.finished and self.answers.poll():
                    self._answer(self.answers.recv())
            except (EOFError, OSError, pickle.UnpicklingError):
                self.broken = True
            return not self.broken and number in self.finished

    def result(self, number: int):
        """Job ``number``'s result (waiting for it), or None if the worker died first or the
        job was taken back."""
        with self.lock:
            if self.broken or number in self.abandoned:
                return None
            try:
                while number not in self.finished:
                    self._answer(self.answers.recv())
            except (EOFError, OSError, pickle.UnpicklingError):
                self.broken = True
                return None
            except BaseException:       # Ctrl-C in a read may leave the pipe out of step
                self.broken = True
                raise
            self.finished.discard(number)
            return _take(self.folder / f"out-{number}")

    def steal(self, number: int) -> bool:
        """Take job ``number`` back if the worker has not started it; whether it was. The
        worker claims a job by renaming its file, so one of the two finds it gone."""
        with self.lock:
            if self.broken or number in self.finished:
                return False
            try:
                (self.folder / f"job-{number}").unlink()
            except FileNotFoundError:
                return False
            self.abandoned.add(number)       # the worker still answers it, with nothing
            return True

    def abandon(self, number: int) -> None:
        """Nobody will ask for job ``number``'s result: drop it if the worker has not started
        it, else remove its result once it is written (a worker stopped at exit: nothing)."""
        if self.broken or self.steal(number):
            return
        with self.lock:
            if number in self.finished:
                self.finished.discard(number)
                (self.folder / f"out-{number}").unlink(missing_ok=True)
            else:
                self.abandoned.add(number)

    def _answer(self, number: int) -> None:
        if number in self.abandoned:
            self.abandoned.discard(number)
            (self.folder / f"out-{number}").unlink(missing_ok=True)
        else:
            self.finished.add(number)

    def close(self) -> None:
        """At exit: stop the worker (no result is wanted any more; it may still be starting,
        and a process that exits should not wait for that) and remove the folder."""
        if self.inherited:
            return
        with self.lock:
            self.broken = True
        self.jobs.close()
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


_lock = threading.Lock()
_worker: _Worker | None = None
_refused = False                # starting one failed


def _forked() -> None:
    """In a child made by ``fork``: the parent's worker, its pipes and folder are not this
    process's to use or stop; the child starts its own if it needs one."""
    global _worker, _lock
    _lock = threading.Lock()
    if _worker is not None:
        _worker.lock = threading.RLock()
        _worker.broken = _worker.inherited = True
    _worker = None


os.register_at_fork(after_in_child=_forked)


def _usable() -> bool:
    if os.environ.get("HWSIM_REFERENCE_WORKER", "1") == "0":
        return False
    if multiprocessing.current_process().daemon:
        return False
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cpus or 1) >= 2


def start(wait: float = 0.0) -> bool:
    """Start the worker if there can be one and none is started; wait up to ``wait`` seconds
    for it to be up. Whether it is up."""
    global _worker, _refused
    with _lock:
        if _worker is None and not _refused and _usable():
            try:
                _worker = _Worker()
            except OSError:         # no process to be had (a limit): every run here
                _refused = True
        worker = _worker
    if worker is None:
        return False
    if wait and not worker.ready():
        with worker.lock:
            worker.answers.poll(wait)
    return worker.ready()


def worker_pid() -> int | None:
    """The process id of the worker, if one is running for this process."""
    worker = _worker
    return worker.process.pid if worker is not None and not worker.broken else None


class Pending:
    """A run of ``graph`` on ``arrays``: job ``number`` of ``worker`` if it was up when
    submitted, else here when ``result`` is first called; here too if the worker has not
    started it by then (``_Worker.steal``). ``known``: values the result includes besides the
    graph's outputs."""

    def __init__(self, graph: Graph, arrays: list, worker: _Worker | None, number: int | None,
                 known: dict):
        self.graph, self.arrays, self.known = graph, arrays, known
        self.worker, self.number = worker, number
        self._result: dict | None = None

    def done(self) -> bool:
        """Whether ``result`` would return without running or waiting for the run."""
        return self._result is not None or (self.number is not None and
                                            self.worker.answered(self.number))

    def take_back(self) -> bool:
        """Take the run back from the worker if it has not started it; whether it was (then
        ``result`` runs it here)."""
        if self.number is None or not self.worker.steal(self.number):
            return False
        self.number = None
        return True

    def result(self) -> dict[str, np.ndarray]:
        """The values by name, or the run's ``ReferenceError``; the wait, or the run here,
        counts as reference-model time (``reference.metered``)."""
        if self._result is None:
            ran = None
            if self.number is not None and not self.worker.steal(self.number):
                with reference.timed():
                    ran = self.worker.result(self.number)
            found = reference.run_graph(self.graph, self.arrays) if ran is None else \
                reference.results(self.graph, ran)
            self._result = {**self.known, **found}
            self.number = None
        return self._result

    def __del__(self):
        if self.number is not None:
            self.worker.abandon(self.number)


def submit(graph: Graph, inputs, known: dict | None = None) -> Pending:
    """A run of ``graph`` on ``inputs`` (as ``reference.run_graph`` takes them), in the worker
    if it is up (module docstring)."""
    arrays = reference.graph_inputs(graph, inputs)
    worker = number = None
    if start() and not reference.binary_only(graph):
        worker = _worker
        number = worker.submit((graph, reference.bits(graph, arrays)))
    return Pending(graph, arrays, worker, number, known or {})


def goldens(graph: Graph, inputs, tensors=None) -> Pending:
    """``reference.goldens`` (the tensors of one run), submitted."""
    whole, values = reference.goldens_graph(graph, inputs, tensors)
    return submit(whole, reference.values_for(graph, values), values)


def _serve(folder: Path, jobs: Connection, answers: Connection) -> None:
    """The worker: run each job (graph, input bits) as it comes, and write
    ``reference.run_flatbuffer``'s result, or None for an error of another kind (the parent
    then runs the job itself and raises that error). When the parent is gone (the end of its
    pipe, or a pipe or the folder missing), the worker removes the folder and ends."""
    try:
        import tosa_reference_model  # noqa: F401  (loaded before saying it is up)
        answers.send("ready")
        while True:
            number = jobs.recv()
            try:
                os.rename(folder / f"job-{number}", folder / f"run-{number}")
            except FileNotFoundError:   # taken back by the parent (``_Worker.steal``)
                answers.send(number)
                continue
            graph, bits = _take(folder / f"run-{number}")
            try:
                ran = reference.run_flatbuffer(write_tosa(graph), bits)
            except Exception:       # noqa: BLE001 - the parent raises it
                ran = None
            _dump(folder / f"out-{number}", ran)
            answers.send(number)
    except (EOFError, OSError):
        pass
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the parent's to handle
    _serve(Path(sys.argv[1]), Connection(int(sys.argv[2]), writable=False),
           Connection(int(sys.argv[3]), readable=False))
