"""``hwsim estimate`` and ``hwsim compile``: the scheduler's commands, registered by
``hwsim.cli``.

``estimate`` lowers a model onto a machine, runs it once and prints (or writes) the per-layer
report; ``--check`` adds each layer's verdict against the TOSA reference, ``--plot`` a figure,
``--timeline`` a Perfetto trace with a track of layers. ``compile`` writes the lowered program
as a trace. Exit status as ``hwsim run``: with ``--check``, 1 when in a bit-exact mode (GAP9
exact, SME int8) a layer or an output is not bit-exact, or when a layer deviates even as its
machine's narrower float format (HMX FP16).
"""

from __future__ import annotations

import argparse
import sys
import time

from hwsim.errors import ConfigError

REPORTS = ("table", "json", "csv")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help=".tflite, .tosa, .mlir or .mlirbc")
    p.add_argument("--target", default="gap9", metavar="NAME", help="gap9 (default), hmx or sme")
    p.add_argument("--mode", metavar="MODE",
                   help="numeric mode: gap9 exact (default; bit-exact), ne16 (NE16-native "
                        "requantisation) or cluster (no NE16: every layer on the 8 cores, "
                        "bit-exact); hmx fp16 (default) or dequantise (int8 graphs); sme "
                        "fp32, bf16-widening, bf16 (float graphs, fp32 default) or int8 (int8 "
                        "graphs)")
    p.add_argument("--weight-bits", type=int, default=8, metavar="N",
                   help="gap9: requantise weights to N bits (2..8) for timing studies")
    p.add_argument("--param", metavar="KEY=VALUE", action="append",
                   help="override a machine parameter (repeatable)")
    p.add_argument("--params", metavar="FILE.toml", help="machine parameters from TOML")
    p.add_argument("--input", metavar="FILE.npy",
                   help="the model input (default: a fixed random sample)")
    p.add_argument("--batch", type=int, default=1, help="dynamic batch size (default 1)")


def register(sub: argparse._SubParsersAction) -> None:
    from hwsim.cli_shared import add_engine
    est = sub.add_parser("estimate", help="lower a model onto a machine and report per layer",
                         description="Lower a TOSA model onto a machine, simulate it, and "
                                     "report cycles, MACs, bytes per memory level, bound and "
                                     "overlap per layer (README: Estimating models).")
    _common(est)
    add_engine(est)
    est.add_argument("--check", action="store_true",
                     help="judge every layer and the outputs against the TOSA reference")
    est.add_argument("--no-numerics", action="store_true",
                     help="timing only: skip the datapaths (same cycles, faster)")
    est.add_argument("--report", choices=REPORTS, default="table", help="report format")
    est.add_argument("-o", "--output", metavar="OUT", help="write the report here")
    est.add_argument("--timeline", metavar="OUT.json", help="write a Perfetto timeline")
    est.add_argument("--plot", metavar="OUT.png",
                     help="plot cycles per layer and a roofline (needs matplotlib)")
    est.set_defaults(func=cmd_estimate)

    comp = sub.add_parser("compile", help="write a model's lowered program as a trace",
                          description="Lower a model and write the program as a trace (data "
                                      "files beside it) that 'hwsim run' accepts.")
    _common(comp)
    comp.add_argument("-o", "--output", metavar="PROGRAM.trace", required=True)
    comp.set_defaults(func=cmd_compile)


def _prepare(args):
    from hwsim.cli_shared import param_overrides
    from hwsim.tosa import load_graph
    graph = load_graph(args.model, batch=args.batch)
    inputs = None
    if args.input:
        import numpy as np
        try:
            inputs = np.load(args.input, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"--input {args.input}: cannot read: {exc}") from None
    return graph, inputs, param_overrides(args)


def cmd_estimate(args) -> int:
    if args.check:          # up by the time the model is lowered: the check's runs go beside
        from hwsim.tosa import background
        background.start()
    from hwsim.cli_shared import Progress
    from hwsim.schedule import estimate
    from hwsim.traces.files import STANDARD_OUTPUT, atomic_write_text, check_output
    for option, path in (("-o", args.output), ("--timeline", args.timeline),
                         ("--plot", args.plot)):
        if path:
            check_output(path, option)
    if args.plot:
        from hwsim.schedule.plot import check_format
        check_format(args.plot)
    graph, inputs, params = _prepare(args)
    progress = Progress(f"hwsim estimate {args.model}")
    try:
        report = estimate(graph, args.target, mode=args.mode, weight_bits=args.weight_bits,
                          params=params, check=args.check, inputs=inputs,
                          numerics=not args.no_numerics, progress=progress, name=args.model,
                          engine=args.engine)
    finally:
        progress.close()
    text = {"table": report.table, "json": report.json, "csv": report.csv}[args.report]()
    if args.output and args.output not in STANDARD_OUTPUT:
        atomic_write_text(args.output, text, "-o")
        print(report.table().splitlines()[0])
    else:
        sys.stdout.write(text)
    if args.timeline:
        from hwsim.schedule.plot import write_timeline
        write_timeline(report, args.timeline)
    if args.plot:
        from hwsim.schedule.plot import plot
        plot(report, args.plot)
    print(f"wall time: {sum(report.wall.values()):.3f} s ("
          + ", ".join(f"{k} {v:.3f}" for k, v in report.wall.items()) + ")", file=sys.stderr)
    from hwsim.schedule import lowering
    failed = args.check and (lowering(report.target).bit_exact(report.mode) and (
        any(r.verdict.status != "exact" for r in report.layers)
        or any(v.status != "exact" for v in report.output_verdicts.values()))
        or any(r.verdict.narrow is not None and r.verdict.narrow.status == "deviates"
               for r in report.layers))
    return 1 if failed else 0


def cmd_compile(args) -> int:
    from hwsim.schedule import compile_model
    from hwsim.traces.files import STANDARD_OUTPUT, check_output
    if args.output in STANDARD_OUTPUT:
        raise ConfigError("compile -o: expected a file (its data files go beside it), found "
                          f"{args.output}")
    check_output(args.output, "-o")
    start = time.perf_counter()
    graph, inputs, params = _prepare(args)
    path = compile_model(graph, args.output, args.target, mode=args.mode,
                         weight_bits=args.weight_bits, params=params, inputs=inputs,
                         name=args.model)
    print(f"{path}: {args.model} for {args.target} ({time.perf_counter() - start:.2f} s)")
    return 0
