"""Running points on Dask distributed: a local cluster of worker processes, or a running
cluster reached by its scheduler's address.

One task per point (``worker.run_point``). Records are appended to the store as their tasks
finish, in the order they finish; a task that fails outside the estimate (its worker died, the
cluster lost it) becomes an error record like any failed point, and the sweep goes on. On an
interrupt the pending tasks are cancelled and the cluster is closed; what finished is on disk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading

from hwsim.errors import ConfigError
from hwsim.sweeps.worker import error_record, hwsim_version, run_point

CONNECT_TIMEOUT_S = 10
WORKER_WAIT_S = 30
_stop = threading.Event()


def stop() -> None:
    """Ask a running ``compute`` to stop. A signal handler's KeyboardInterrupt can land in a
    finalizer (a Dask future's ``__del__``), which swallows it; the loop then stops at the next
    finished point."""
    _stop.set()


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:    # not on Linux
        return os.cpu_count() or 1


def compute(points: list, store, workers: int | None = None, scheduler: str | None = None,
            progress=None) -> int:
    """Run ``points`` (none of them in the store yet), append their records to ``store`` and
    return how many finished; ``progress(computed, failed)`` after each point."""
    _check(workers, scheduler)
    if not points:
        return 0
    from distributed import as_completed
    computed = errors = 0
    _stop.clear()
    with _client(workers, scheduler) as client:
        futures = {client.submit(run_point, point, pure=False): point for point in points}
        try:
            for future in as_completed(futures):
                point = futures.pop(future)
                try:
                    record = future.result()
                except Exception as exc:    # the task, not the estimate: run it again next time
                    record = {**error_record(f"{type(exc).__name__}: {exc}"), "wall_s": None,
                              "lost": True}
                store.append({"key": point.key, "point": _identity(point), **record})
                computed += 1
                errors += record["status"] != "ok"
                if progress:
                    progress(computed, errors)
                if _stop.is_set():
                    raise KeyboardInterrupt
        finally:
            client.cancel(list(futures))
    return computed


def _identity(point) -> dict:
    """What the point was, in its store line (for a reader of the store; not read back)."""
    return {"model": point.model.text, "sha256": point.model.sha256, "target": point.target,
            "mode": point.mode, "weight_bits": point.weight_bits, "numerics": point.numerics,
            "params": dict(point.params)}


def _check(workers: int | None, scheduler: str | None) -> None:
    if scheduler and workers is not None:
        raise ConfigError("workers: a running cluster has its own workers; give either a "
                          "scheduler address or a number of local workers")
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool)
                                or workers < 1):
        raise ConfigError(f"workers: expected a whole number >= 1, found {workers!r}")


@contextlib.contextmanager
def _client(workers: int | None, scheduler: str | None):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError("sweeps need dask distributed: pip install 'hwsim[sweep]'") from None
    if scheduler:
        with _connect(Client, scheduler) as client:
            yield client
        return
    workers = cores() if workers is None else workers
    try:
        with _workers_ignore_sigint():
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=logging.ERROR)
    except RuntimeError as exc:
        # worker processes start by importing the caller's main module (multiprocessing spawn)
        raise ConfigError(f"cannot start {workers} local Dask worker process(es): {exc} (a "
                          "script must call hwsim.sweep under if __name__ == '__main__':)") \
            from None
    try:
        with Client(cluster) as client:
            yield client
    finally:
        cluster.close()


@contextlib.contextmanager
def _workers_ignore_sigint():
    """Start the local workers with SIGINT ignored (a disposition that survives exec, and then
    Python installs no KeyboardInterrupt handler): Ctrl-C on a terminal reaches the whole
    process group, and the client, not each worker with its traceback, shuts the cluster down.
    A Ctrl-C while the workers start is lost; the next one stops the sweep."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _connect(Client, address: str):
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ConfigError(f"scheduler {address}: cannot connect: {exc}") from None
    try:
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except TimeoutError:
            raise ConfigError(f"scheduler {address}: no worker joined within "
                              f"{WORKER_WAIT_S} s") from None
        from hwsim.version import __version__
        try:
            versions = client.run(hwsim_version)
        except Exception as exc:
            raise ConfigError(f"scheduler {address}: a worker cannot run hwsim: "
                              f"{type(exc).__name__}: {exc}") from None
        for worker, version in versions.items():
            if version != __version__:
                raise ConfigError(f"scheduler {address}: worker {worker} runs hwsim {version}, "
                                  f"this is {__version__}")
        yield client
    finally:
        client.close()
