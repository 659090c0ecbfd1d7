"""The ``hwsim`` command.

Exit status: 0 success, 1 an ``.expect`` mismatch, 2 bad input (one line on stderr; ``--debug``
shows the traceback), 3 an internal error (a bug: one line asking for a report with ``--debug``),
130 interrupted (Ctrl-C), 143 terminated (SIGTERM). Interrupted or terminated, hwsim removes the
temporary files of the outputs it was writing. The heavy modules are imported inside ``main`` so
that Ctrl-C during start-up is handled too.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
from pathlib import Path

from hwsim.cli_shared import Progress, add_engine, param_overrides
from hwsim.errors import ConfigError, HwsimError, clip
from hwsim.targets import machine_class, targets
from hwsim.version import __version__

INTERNAL_ERROR = 3


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so that it unwinds (and cleans up) as on Ctrl-C."""


def _terminate(signum, frame):
    raise Terminated


def cmd_run(args) -> int:
    from hwsim.results import summary_text, write_json, write_timeline
    from hwsim.traces.files import check_output
    from hwsim.traces.reader import read_trace
    if args.target:
        machine_class(args.target)                      # an unknown name, before the trace
    for option in ("json", "timeline"):
        if getattr(args, option):
            check_output(getattr(args, option), f"--{option}")
    trace = read_trace(Path(args.trace)) if Path(args.trace).exists() else None
    if trace is None:
        raise HwsimError(f"{args.trace}: no such trace file")
    name = trace.target.text if trace.target else args.target
    if trace.target and args.target and args.target != trace.target.text:
        raise ConfigError(f"--target {args.target} contradicts {trace.target.loc}: "
                          f".target {trace.target.text}")
    if not name:
        raise ConfigError(f"{args.trace}: no target; add '.target NAME' to the trace or pass "
                          f"--target ({', '.join(targets())})")
    cls = machine_class(name)
    arch, timing = cls.PARAMS.split(param_overrides(args))
    for directive in trace.params:
        key, value = directive.args
        if key.text in cls.PARAMS.rows and cls.PARAMS.rows[key.text].kind == "arch":
            arch.setdefault(key.text, value.text)
    machine = cls(**arch)
    progress = Progress(f"hwsim run {args.trace}")
    try:
        result = machine.run(trace, params=timing, progress=progress, engine=args.engine)
    finally:
        progress.close()
    print(summary_text(result))
    passed = [check["message"] for check in result.stats["expects"] if not check["differ"]]
    if passed:
        print("\n" + "\n".join(passed))
    if args.json:
        write_json(result, args.json)
    if args.timeline:
        write_timeline(result, args.timeline)
    return 1 if result.expect_failures else 0


def cmd_targets(args) -> int:
    names = [args.name] if args.name else targets()
    for name in names:
        cls = machine_class(name)
        print(f"{name}: {cls.description}")
        rows = [row for row in cls.PARAMS if args.all or row.kind == "timing"]
        width = max((len(r.name) for r in cls.PARAMS), default=4)
        valid = max((len(r.limits()) for r in rows), default=5)
        for row in rows:
            value = (f"{row.default:g}" if isinstance(row.default, float) else
                     f"{row.default:#x}" if row.valid is not None and row.valid.hex else
                     str(row.default))
            print(f"  {row.name:<{width}}  {value:>12} {row.unit:<10} {row.limits():<{valid}}  "
                  f"{row.source}")
        print()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hwsim", description="Cycle-approximate simulator of ML matrix engines "
                                  "(Hexagon HMX, Arm SME, GAP9 NE16).")
    parser.add_argument("--version", action="version", version=f"hwsim {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="simulate an instruction trace",
                         description="Simulate a trace and print cycles, time, MACs, "
                                     "utilisation, per-unit busy/stall and per-port bandwidth.")
    run.add_argument("trace", metavar="TRACE", help="trace file (see README: trace format)")
    run.add_argument("--target", metavar="NAME", help="machine, if the trace has no .target")
    run.add_argument("--param", metavar="KEY=VALUE", action="append",
                     help="override a parameter (repeatable; 'hwsim targets' lists them)")
    run.add_argument("--params", metavar="FILE.toml", help="override parameters from TOML")
    run.add_argument("--timeline", metavar="OUT.json", help="write a Chrome/Perfetto timeline")
    run.add_argument("--json", metavar="OUT.json", help="write the summary as JSON")
    add_engine(run)
    run.set_defaults(func=cmd_run)

    tg = sub.add_parser("targets", help="list machines and their parameters with sources")
    tg.add_argument("name", nargs="?", help="only this machine")
    tg.add_argument("--all", action="store_true",
                    help="also list architectural parameters (sizes, numeric modes)")
    tg.set_defaults(func=cmd_targets)

    from hwsim.tosa.cli import register as register_model_commands
    register_model_commands(sub)
    from hwsim.schedule.cli import register as register_schedule_commands
    register_schedule_commands(sub)
    from hwsim.sweeps.cli import register as register_sweep_commands
    register_sweep_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = None
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:                          # not the main thread: leave SIGTERM alone
        previous = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not args.command:
            parser.print_help()
            return 2
        with _debug_log(args.debug):
            return args.func(args)
    except HwsimError as exc:
        if args is not None and args.debug:
            raise
        print(f"hwsim: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except Terminated:
        print("hwsim: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("hwsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of our output went away (e.g. `hwsim inspect ... | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if args is not None and args.debug:
            raise
        print(f"hwsim: internal error: {type(exc).__name__}: {_one_line(exc)} (a bug in hwsim; "
              "please report it with the output of the same command run with --debug)",
              file=sys.stderr)
        return INTERNAL_ERROR
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _debug_log(enabled: bool):
    """hwsim's own debug messages (e.g. the converters' output) on stderr, for one command."""
    if not enabled:
        yield
        return
    logger = logging.getLogger("hwsim")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _one_line(exc: Exception) -> str:
    return clip(" ".join(str(exc).split()), 1000)


if __name__ == "__main__":
    sys.exit(main())
