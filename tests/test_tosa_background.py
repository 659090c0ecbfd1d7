"""Reference runs in the worker process: the same results and errors as runs in this process,
and every way the worker can be missing (not up yet, turned off, dead) falls back to them."""

import multiprocessing
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import hwsim
from hwsim.tosa import background, models
from hwsim.tosa.builder import GraphBuilder
from hwsim.tosa.reference import ReferenceError, goldens, run_graph

from tests.test_tosa_reference import argmax_with_bad_output, rescale_with_shift

pytestmark = pytest.mark.skipif(not background._usable(),
                                reason="no worker here (one CPU, or HWSIM_REFERENCE_WORKER=0)")


def _folders() -> set:
    """The reference workers' folders now on this machine."""
    shm = Path("/dev/shm")
    return set((shm if shm.is_dir() else Path(tempfile.gettempdir())).glob("hwsim-reference-*"))


@pytest.fixture
def worker():
    """A worker of the test's own, up; the module's is put back afterwards."""
    saved = background._worker
    background._worker = None
    assert background.start(wait=60)
    made = background._worker
    assert background.worker_pid() == made.process.pid
    yield made
    made.close()
    background._worker = saved


def test_runs_in_the_worker_give_what_runs_here_give(worker):
    g = models.model("ds_cnn", width=0.25)
    x = models.sample_input(g)
    pending = background.goldens(g, [x])
    assert pending.number is not None                   # it ran in the worker
    found, want = pending.result(), goldens(g, [x])
    assert set(found) == set(want)
    assert all(np.array_equal(found[name], want[name]) for name in want)
    b = GraphBuilder()
    h = b.input((4,), "bf16")
    cast = b.build(b.cast(b.cast(h, "fp32"), "bf16"))
    values = np.array([1.5, -2.0, 0.25, 3.0]).astype(h.dtype.np)
    out = background.submit(cast, values).result()[cast.outputs[0].name]
    assert out.dtype == h.dtype.np and np.array_equal(out, values)


def test_reference_errors_come_back_the_same(worker, capfd):
    for graph, x in ((argmax_with_bad_output(), np.zeros((2, 3), np.int8)),
                     (rescale_with_shift(1), np.ones((1, 4), np.int32))):
        with pytest.raises(ReferenceError) as here:
            run_graph(graph, x)
        pending = background.submit(graph, x)
        assert pending.number is not None
        with pytest.raises(ReferenceError) as there:
            pending.result()
        assert str(there.value) == str(here.value) and there.value.status == here.value.status
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""      # the worker's prints were captured


def test_a_dead_worker_leaves_its_runs_and_the_later_ones_to_this_process(worker):
    g = models.model("ds_cnn", width=0.25)
    x = models.sample_input(g)
    want = run_graph(g, [x])
    pending = background.submit(g, [x])
    assert pending.number is not None
    worker.process.kill()
    worker.process.wait()
    found = pending.result()
    assert all(np.array_equal(found[name], want[name]) for name in want)
    later = background.submit(g, [x])
    assert later.number is None and worker.broken and not background.start()
    assert background.worker_pid() is None
    assert all(np.array_equal(later.result()[name], want[name]) for name in want)
    worker.close()                  # what the dead worker left (a job it had begun) goes too
    assert not worker.folder.exists()


def test_a_job_the_worker_has_not_started_is_taken_back_and_run_here(worker):
    big = models.model("resnet8", dtype="fp32")
    small = models.model("ds_cnn", width=0.25)
    x, y = models.sample_input(big), models.sample_input(small)
    first, second = background.submit(big, [x]), background.submit(small, [y])
    assert worker.steal(second.number)                  # the worker is busy with the first
    assert not worker.steal(second.number)              # and cannot be taken twice
    want = run_graph(small, [y])
    assert all(np.array_equal(second.result()[name], want[name]) for name in want)
    number = first.number
    first.result()
    assert not worker.steal(number)                     # done: nothing to take back
    background.submit(small, [y]).result()              # the worker's answer to the one
    assert list(worker.folder.iterdir()) == []          # taken back left nothing


def test_a_run_is_done_once_the_worker_has_written_its_result(worker):
    small = models.model("ds_cnn", width=0.25)
    y = models.sample_input(small)
    pending = background.submit(small, [y])
    deadline = time.monotonic() + 60
    while not pending.done():           # never waits: it reads the answers that have come
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert pending.number in worker.finished
    want = run_graph(small, [y])
    assert all(np.array_equal(pending.result()[name], want[name]) for name in want)
    assert pending.done()


def test_ctrl_c_while_waiting_gives_the_worker_up(worker, monkeypatch):
    """A read cut short may leave the pipe out of step: the worker is not used again."""
    g = models.model("ds_cnn", width=0.25)
    x = models.sample_input(g)
    pending = background.submit(g, [x])

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(worker, "steal", lambda number: False)      # it has started, say
    monkeypatch.setattr(worker.answers, "recv", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pending.result()
    assert worker.broken and background.submit(g, [x]).number is None


def _claimed(worker, number: int) -> None:
    """Wait until the worker has taken job ``number`` (its file is renamed)."""
    deadline = time.monotonic() + 60
    while (worker.folder / f"job-{number}").exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    assert not (worker.folder / f"job-{number}").exists()


def test_results_nobody_asks_for_are_removed(worker):
    big, small = models.model("resnet8", dtype="fp32"), models.model("ds_cnn", width=0.25)
    x, y = models.sample_input(big), models.sample_input(small)
    first = background.submit(big, [x])                 # keeps the worker busy
    waiting = background.submit(small, [y])
    number = waiting.number
    del waiting                                         # not started: dropped
    assert not (worker.folder / f"job-{number}").exists()
    first.result()
    running = background.submit(big, [x])
    _claimed(worker, running.number)
    del running                                         # started: its result goes on arrival
    last = background.submit(small, [y])
    _claimed(worker, last.number)                       # so the one before has ended
    last.result()
    assert list(worker.folder.iterdir()) == []


def test_a_job_before_the_worker_is_up_runs_here(worker, monkeypatch):
    monkeypatch.setattr(worker, "up", False)
    monkeypatch.setattr(worker.answers, "poll", lambda *timeout: False)
    g = models.model("ds_cnn", width=0.25)
    x = models.sample_input(g)
    pending = background.submit(g, [x])
    assert pending.number is None
    assert all(np.array_equal(a, run_graph(g, [x])[n]) for n, a in pending.result().items()
               if n == g.outputs[0].name)


def _in_a_forked_child(answer) -> None:
    g = models.model("ds_cnn", width=0.25)
    x = models.sample_input(g)
    found = background.submit(g, [x]).result()
    want = run_graph(g, [x])
    answer.put(all(np.array_equal(found[name], want[name]) for name in want))


def test_a_forked_child_leaves_its_parents_worker_alone(worker):
    g = models.model("ds_cnn", width=0.25)
    x = models.sample_input(g)
    queued = background.submit(g, [x])                  # the parent's job, still pending
    before = _folders()
    context = multiprocessing.get_context("fork")
    answer = context.Queue()
    child = context.Process(target=_in_a_forked_child, args=(answer,))
    child.start()
    assert answer.get(timeout=120) is True
    child.join()
    deadline = time.monotonic() + 60        # the child's own worker, left starting, ends too
    while _folders() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _folders() - before
    want = run_graph(g, [x])
    assert not worker.broken and queued.number is not None
    assert all(np.array_equal(queued.result()[name], want[name]) for name in want)
    later = background.submit(g, [x])
    assert later.number is not None
    assert all(np.array_equal(later.result()[name], want[name]) for name in want)


def test_no_process_to_be_had_means_every_run_here(monkeypatch):
    """A worker that cannot be started (a limit on processes) leaves nothing behind and the
    runs to this process."""
    def refused(*args, **kwargs):
        raise OSError("no more processes")

    before = _folders()
    monkeypatch.setattr(background, "_worker", None)
    monkeypatch.setattr(background, "_refused", False)
    monkeypatch.setattr(background.subprocess, "Popen", refused)
    g = models.model("ds_cnn", width=0.25)
    x = models.sample_input(g)
    pending = background.submit(g, [x])
    assert pending.number is None and background._refused and _folders() == before
    want = run_graph(g, [x])
    assert all(np.array_equal(pending.result()[name], want[name]) for name in want)


def _daemonic_usable(answer) -> None:
    answer.put(background._usable())


def test_no_worker_when_turned_off_or_in_a_daemonic_process(monkeypatch):
    monkeypatch.setenv("HWSIM_REFERENCE_WORKER", "0")
    assert not background._usable()
    monkeypatch.delenv("HWSIM_REFERENCE_WORKER")
    context = multiprocessing.get_context("spawn")
    answer = context.Queue()
    child = context.Process(target=_daemonic_usable, args=(answer,), daemon=True)
    child.start()
    assert answer.get(timeout=60) is False
    child.join()


def test_a_script_without_a_main_guard_runs_once(tmp_path):
    """The worker is a module of its own: the user's script is not run again in it."""
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent("""
        from hwsim.tosa import background, models
        print("top level", flush=True)
        assert background.start(wait=60)
        g = models.model("ds_cnn", width=0.25)
        pending = background.submit(g, [models.sample_input(g)])
        assert pending.number is not None
        pending.result()
        print("done", flush=True)"""))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["top", "level", "done"]


def test_an_estimate_from_the_command_line_leaves_nothing_behind(tmp_path):
    """The worker's folder goes with the process that made it (the worker is stopped at
    exit), whether or not the worker was up in time for the check."""
    from hwsim.tosa.loaders import save_graph
    path = tmp_path / "m.tosa"
    save_graph(models.model("ds_cnn", dtype="fp32", width=0.25), path)
    folders = _folders()
    done = subprocess.run([sys.executable, "-m", "hwsim", "estimate", str(path), "--target",
                           "sme", "--mode", "fp32", "--check"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert _folders() <= folders


@pytest.mark.parametrize("target, mode, dtype", [("gap9", "cluster", "int8"),
                                                 ("gap9", "ne16", "int8"),
                                                 ("hmx", "dequantise", "int8"),
                                                 ("sme", "fp32", "fp32"),
                                                 ("sme", "bf16", "fp32")])
def test_a_check_judges_the_same_with_the_worker_and_without(worker, monkeypatch, target, mode,
                                                             dtype):
    """The same verdicts. During the simulation (``check.ahead``): on SME, which runs its
    program before the timing, the float layers' goldens were submitted; on HMX, which
    computes in FP16, the layers as FP16 operators; on GAP9 none (nothing in ``ne16``, whose
    layers are integer; ``cluster`` is bit-exact)."""
    from hwsim.schedule import check
    g = models.model("ds_cnn", dtype=dtype, width=0.25)
    made = []

    def ahead(*args):
        made.append(real(*args))
        return made[-1]

    real = check.ahead
    monkeypatch.setattr(check, "ahead", ahead)

    def report():
        r = hwsim.estimate(g, target, mode=mode, check=True)
        return ([str(row.verdict) for row in r.layers],
                {k: str(v) for k, v in r.output_verdicts.items()}, r.cycles)

    with_worker = report()
    if target == "gap9":
        assert made in ([], [None])
    else:
        went, stayed = ("golden", "narrow") if target == "sme" else ("narrow", "golden")
        assert getattr(made[0], went).runs and not getattr(made[0], stayed).made
    assert background.start()
    monkeypatch.setattr(worker, "broken", True)        # every run in this process
    assert report() == with_worker


def test_goldens_the_worker_has_not_started_are_taken_back_from_the_last(worker, monkeypatch):
    """``Ahead.results``: the runs still queued behind a long one are run here, last first;
    every golden is what each layer run on its own inputs gives."""
    from hwsim.schedule import goldens as module
    from hwsim.schedule.goldens import Ahead, Goldens
    monkeypatch.setattr(module, "PART_WORK", 1)         # parts of a small model
    from hwsim.schedule.lowering import Layer
    g = models.model("ds_cnn", dtype="fp32", width=0.25)
    x = models.sample_input(g)
    whole = goldens(g, [x])
    layers = [Layer(i, [op]) for i, op in enumerate(g)]
    feeds = {layer.index: {t.name: whole[t.name] for t in layer.inputs} for layer in layers}
    busy = background.submit(models.model("resnet8", dtype="fp32"),
                             [models.sample_input(models.model("resnet8", dtype="fp32"))])
    early = Ahead(layers, {g.inputs[0].name: x}, lambda layer, f: (layer, f))
    for layer in layers:
        early.heard(layer.index, whole[layer.output.name])
    parts = list(early.runs)
    assert len(parts) > 1 and all(p.pending.number is not None for p in parts)
    found = early.results()
    assert parts[-1].pending.number is None            # taken back: run here
    want = Goldens(layers, feeds, beside=False).result()
    assert found.keys() == want.keys()
    assert all(found[i].tobytes() == want[i].tobytes() for i in want)
    busy.result()
