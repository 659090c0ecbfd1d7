"""Sweeps on real Dask components: a LocalCluster of 2 worker processes, a separate
``dask scheduler`` and ``dask worker`` on loopback reached with ``--scheduler``, and a sweep
killed (SIGKILL), stopped (SIGTERM) and finished by a third run. Every row must equal the
single-process ``hwsim.estimate`` of its point, and no point may be computed twice."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import hwsim
from hwsim.cli import main
from hwsim.errors import HwsimError
from hwsim.sweeps import read_spec
from tests.models import model

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sweeps" / "gap9_kws.toml"
MODEL = ROOT / "examples" / "models" / "ds_cnn_int8.tosa"
HWSIM = [sys.executable, "-m", "hwsim"]
RESULTS = ["cycles", "seconds", "macs", "bytes_L3", "bytes_L2", "bytes_MRAM", "bytes_L1", "status",
           "error"]


def expected(spec) -> list[tuple]:
    """Each point's results from a plain in-process estimate, in the table's columns."""
    graphs = {}
    rows = []
    for p in spec.points():
        graph = graphs.setdefault(p.model.path, hwsim.load_graph(p.model.path))
        try:
            r = hwsim.estimate(graph, p.target, mode=p.mode, weight_bits=p.weight_bits,
                               params=p.machine_params, numerics=p.numerics)
        except HwsimError as exc:
            rows.append((None,) * 7 + ("error", str(exc)))
            continue
        levels = {lv: t["bytes"] for lv, t in r.totals["levels"].items()}
        rows.append((r.cycles, r.seconds, r.macs, levels["L3"], levels["L2"], levels["MRAM"],
                     levels["L1"], "ok", ""))
    return rows


def results(frame) -> list[tuple]:
    return [tuple(row) for row in frame[RESULTS].astype(object).itertuples(index=False)]


def same(rows, others) -> bool:
    """Equal, with empty values (None, NA, NaN, "") alike."""
    import pandas as pd

    def plain(row):
        return tuple(None if pd.isna(v) or v == "" else v for v in row)
    return [plain(r) for r in rows] == [plain(r) for r in others]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """The example spec on a LocalCluster of 2 worker processes."""
    store = tmp_path_factory.mktemp("local") / "kws.points.jsonl"
    return hwsim.sweep(EXAMPLE, workers=2, layers=True, store=store)


def test_a_local_cluster_sweep_equals_single_process_estimates(local):
    points, layers = local
    spec = read_spec(EXAMPLE)
    assert list(points.columns) == ["model", "target", "mode", "weight_bits", "gap9.l1_size",
                                    "gap9.mram_bytes_per_cycle", *RESULTS, "wall_s"]
    assert [tuple(r) for r in points[["weight_bits", "gap9.l1_size",
                                      "gap9.mram_bytes_per_cycle"]].itertuples(index=False)] == [
        (p.weight_bits, *dict(p.params).values()) for p in spec.points()]
    assert same(results(points), expected(spec))
    assert (points["status"] == "error").sum() == 6            # the 4 KiB L1 points
    cycles = {(r[0], r[1], r[2]): r[3] for r in points[[
        "weight_bits", "gap9.l1_size", "gap9.mram_bytes_per_cycle", "cycles"]].itertuples(
        index=False)}                                           # as docs/sweeps.md shows
    assert [cycles[4, 49152, 2.0], cycles[4, 65536, 8.0], cycles[8, 49152, 8.0],
            cycles[8, 131072, 8.0]] == [352114, 349564, 370089, 368856]
    ok = points[points["status"] == "ok"]
    per_point = layers.groupby(["weight_bits", "gap9.l1_size", "gap9.mram_bytes_per_cycle"])
    assert len(per_point) == len(ok) and len(layers) == 26 * len(ok)
    sums = per_point["cycles"].sum()
    for _, row in ok.iterrows():
        key = (row["weight_bits"], row["gap9.l1_size"], row["gap9.mram_bytes_per_cycle"])
        assert sums[key] == pytest.approx(row["cycles"])     # layers add up to the run


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """A ``dask scheduler`` and one ``dask worker`` process on loopback."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    folder = tmp_path_factory.mktemp("cluster")
    address_file = folder / "scheduler.json"
    started = [subprocess.Popen(
        [sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
         "--no-dashboard", "--scheduler-file", str(address_file)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 60
        while not address_file.exists() or not address_file.read_text():
            assert time.monotonic() < deadline, "the dask scheduler did not start"
            time.sleep(0.1)
        address = json.loads(address_file.read_text())["address"]
        started.append(subprocess.Popen(
            [sys.executable, "-m", "dask", "worker", address, "--nthreads", "1", "--nworkers", "1",
             "--no-dashboard", "--no-nanny", "--host", "127.0.0.1"],
            env=env, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield address
    finally:
        for process in reversed(started):
            process.kill()
            process.wait(timeout=30)


def test_a_running_cluster_gives_the_same_rows(local, dask_cluster, tmp_path, capsys):
    out = tmp_path / "kws.parquet"
    assert main(["sweep", str(EXAMPLE), "-o", str(out), "--scheduler", dask_cluster]) == 0
    assert capsys.readouterr().out.startswith(
        f"{out}: 24 points, 6 failed (0 reused from {tmp_path / 'kws.points.jsonl'}, "
        "24 computed)")
    import pandas as pd
    remote, points = pd.read_parquet(out), local[0]
    columns = [c for c in points.columns if c != "wall_s"]
    pd.testing.assert_frame_equal(remote[columns], points[columns])


def _run(spec: Path, out: Path, *options) -> subprocess.Popen:
    return subprocess.Popen([*HWSIM, "sweep", str(spec), "-o", str(out), *options],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _lines(store: Path) -> list[str]:
    return store.read_text().splitlines() if store.exists() else []


def _wait_for(store: Path, count: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while len(_lines(store)) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.005)


def test_a_killed_sweep_resumes_without_computing_a_point_twice(dask_cluster, tmp_path):
    """Killed (SIGKILL to the command and its local workers), resumed on the running cluster
    and stopped (SIGTERM), then finished there: each point is in the store once, and the
    table is complete."""
    spec = tmp_path / "grid.toml"
    spec.write_text(f'models = ["{MODEL}"]\ntargets = ["gap9"]\nweight_bits = [4, 8]\n'
                    '[params]\n"gap9.l1_size" = [65536, 131072]\n'
                    '"gap9.mram_bytes_per_cycle" = [2, 4, 8]\n'
                    '"gap9.l2_bytes_per_cycle" = [4, 8]\n')
    total = 24
    out, store = tmp_path / "grid.csv", tmp_path / "grid.points.jsonl"
    first = _run(spec, out, "--workers", "1")
    _wait_for(store, 2, first)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    after_kill = len(_lines(store))

    second = _run(spec, out, "--scheduler", dask_cluster)
    _wait_for(store, after_kill + 2, second)
    second.send_signal(signal.SIGTERM)
    _, err = second.communicate(timeout=60)
    assert second.returncode == 130, err
    after_term = len(_lines(store))
    assert f"interrupted: {after_term} of {total} points finished are in {store}" in err
    assert after_kill + 2 <= after_term < total and not out.exists()

    third = _run(spec, out, "--scheduler", dask_cluster)
    stdout, err = third.communicate(timeout=300)
    assert third.returncode == 0, err
    assert stdout.startswith(f"{out}: {total} points, 0 failed ({after_term} reused from "
                             f"{store}, {total - after_term} computed)")
    keys = [json.loads(line)["key"] for line in _lines(store)]
    assert len(keys) == len(set(keys)) == total        # every point computed exactly once
    import pandas as pd
    assert same(results(pd.read_csv(out)), expected(read_spec(spec)))


def test_the_mlperf_kws_model_on_gap9(dask_cluster):
    kws = model("kws_ref_model.tflite")
    points = hwsim.sweep({"models": [str(kws)], "targets": ["gap9"],
                          "params": {"gap9.clock_hz": [370e6, 240e6]}}, scheduler=dask_cluster)
    assert points["cycles"].tolist() == [375044, 375044]          # benchmarks/results/models.json
    assert points["seconds"].tolist() == [375044 / 370e6, 375044 / 240e6]


def test_a_stop_whose_interrupt_was_swallowed_ends_the_sweep_at_the_next_point(dask_cluster,
                                                                              tmp_path):
    """A signal handler's KeyboardInterrupt can land in a finalizer, which swallows it; the
    stop it also asked for (``execute.stop``) still ends the sweep after the next finished
    point, with that point stored and the rest cancelled."""
    from hwsim.sweeps import Store
    from hwsim.sweeps.execute import compute, stop
    spec = tmp_path / "grid.toml"
    spec.write_text(f'models = ["{MODEL}"]\ntargets = ["gap9"]\n'
                    '[params]\n"gap9.l2_bytes_per_cycle" = [2, 4, 8, 16]\n')
    store = Store(tmp_path / "grid.points.jsonl")
    with pytest.raises(KeyboardInterrupt):
        compute(read_spec(spec).points(), store, scheduler=dask_cluster,
                progress=lambda computed, failed: stop())
    assert len(_lines(tmp_path / "grid.points.jsonl")) == 1
