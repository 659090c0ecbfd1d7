"""``hwsim sweep`` and ``hwsim plot``: the sweep commands, registered by ``hwsim.cli``.

``sweep`` validates a spec, runs its points on Dask (a local cluster, or ``--scheduler``), keeps
every finished point in a store beside the table (``NAME.points.jsonl``) and writes the table
(``--layers``: also ``NAME.layers.EXT``). A rerun reuses the store; an interrupt (Ctrl-C,
SIGTERM) leaves it on disk. ``plot`` draws two columns of a table with their Pareto front.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time


def register(sub: argparse._SubParsersAction) -> None:
    """Add the sweep commands to the ``hwsim`` command's sub-parsers."""
    sw = sub.add_parser("sweep", help="estimate every point of a design-space grid on Dask",
                        description="Run every combination of a spec's models, targets, modes, "
                                    "weight widths and parameters (docs/sweeps.md) and write "
                                    "one row per point.")
    sw.add_argument("spec", metavar="SPEC.toml", help="the sweep spec")
    sw.add_argument("-o", "--output", metavar="RESULTS", required=True,
                    help="the table: .parquet or .csv (the store goes beside it)")
    sw.add_argument("--workers", type=int, metavar="N",
                    help="local worker processes (default: the core count)")
    sw.add_argument("--scheduler", metavar="ADDRESS",
                    help="run on a running Dask cluster instead (tcp://HOST:PORT)")
    sw.add_argument("--layers", action="store_true",
                    help="also write one row per point and layer to NAME.layers.EXT")
    sw.set_defaults(func=cmd_sweep)

    pl = sub.add_parser("plot", help="plot two columns of a sweep with their Pareto front",
                        description="Scatter a sweep table's finished points and mark the "
                                    "Pareto front of the two columns (both minimised).")
    pl.add_argument("results", metavar="RESULTS", help="a table from 'hwsim sweep'")
    pl.add_argument("--x", required=True, metavar="KEY", help="column on x (minimised)")
    pl.add_argument("--y", required=True, metavar="KEY", help="column on y (minimised)")
    pl.add_argument("--color", metavar="KEY", help="colour the points by this column")
    pl.add_argument("-o", "--output", metavar="OUT.png", required=True,
                    help="the image: .png, .svg or .pdf")
    pl.set_defaults(func=cmd_plot)


def _interrupt(signum, frame):
    from hwsim.sweeps.execute import stop
    stop()                  # in case the exception lands in a finalizer, which swallows it
    raise KeyboardInterrupt


def cmd_sweep(args) -> int:
    from hwsim.sweeps import Store, read_spec, run, store_path
    from hwsim.sweeps.table import check_output, layers_path, write_table
    start = time.perf_counter()
    output = check_output(args.output)
    spec = read_spec(args.spec)
    store = store_path(output)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    ctrl_c = signal.getsignal(signal.SIGINT)      # ignored stays ignored (a background job)
    if ctrl_c is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    try:
        outcome = run(spec, args.workers, args.scheduler, store, progress=True)
    except KeyboardInterrupt:
        points, kept = spec.points(), Store(store)
        done = sum(kept.finished(p.key) for p in points)
        print(f"hwsim: interrupted: {done} of {len(points)} points finished are in {store}; "
              "run the same command again to finish", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, ctrl_c)
    write_table(outcome.points(), output)
    print(f"{output}: {len(outcome.rows)} points, {outcome.failed} failed ({outcome.reused} reused "
          f"from {store}, {outcome.computed} computed) in {time.perf_counter() - start:.1f} s")
    if args.layers:
        path = layers_path(output)
        write_table(outcome.layers(), path)
        print(f"{path}: one row per point and layer")
    return 0


def cmd_plot(args) -> int:
    from hwsim.sweeps.plot import IMAGE_FORMATS, finished, plot
    from hwsim.sweeps.table import check_output, read_table
    output = check_output(args.output, IMAGE_FORMATS)
    columns = [args.x, args.y] + ([args.color] if args.color else [])
    frame = finished(read_table(args.results), columns, args.results)
    front = plot(frame, args.x, args.y, output, args.color, title=str(args.results))
    print(f"{output}: {len(frame)} points, {len(front)} on the Pareto front of "
          f"{args.x} and {args.y}:")
    shown = [c for c in front.columns if c not in ("status", "error", "wall_s")]
    print(front[shown].to_string(index=False))
    return 0
