"""The ``npusim`` command: demo, predict, run, check (the schedule sanitizer), chips, plot.

Operators come from the operator registry (npusim.registry): no operator is imported here by name. A
command that works on one operator problem takes ``OP KEY=VALUE...`` through :func:`add_problem_args`
and gets the entry and the parsed problem from :func:`problem_of`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError, NpusimError

CHIP_HELP = "chip preset (list them with `npusim chips`) or a chip .toml file (default %(default)s)"


def add_problem_args(parser: argparse.ArgumentParser) -> None:
    """The OP and KEY=VALUE arguments of a command on one operator problem."""
    from npusim import registry

    names = ", ".join(registry.operators()) or "none registered"
    parser.add_argument("op", metavar="OP", help=f"operator: {names}")
    parser.add_argument("params", nargs="*", metavar="KEY=VALUE",
                        help="problem parameters, e.g. B=1 N=20 S=2097152 D=256 N_kv=1 (keys: see below)")


def problem_of(args, extra=()):
    """(OperatorEntry, parsed problem dict) of the OP and KEY=VALUE arguments (AclnnError if bad)."""
    from npusim import registry

    entry = registry.get(args.op)
    return entry, entry.parse(args.params, extra=extra)


def _cmd_chips(args) -> int:
    from npusim.chip import chips_table

    print(chips_table())
    return 0


def _cmd_plot(args) -> int:
    from npusim.trace_sink import load_trace

    if not Path(args.trace).is_file():
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"plot: file not found: {args.trace}")
    trace = load_trace(args.trace, cores=range(max(args.max_cores, 1)))
    out = Path(args.out or Path(args.trace).with_suffix(".png"))
    trace.plot_gantt(out, max_cores=args.max_cores)
    print(f"wrote {out}")
    return 0


def _cmd_predict(args) -> int:
    from npusim.predict import predict, report

    print(report(predict(args.op, args.params)))
    return 0


def _cmd_run(args) -> int:
    from npusim.chip import chip as get_chip
    from npusim.demo import time_lines

    entry, problem = problem_of(args)
    spec = get_chip(args.chip)
    res = entry.call(problem, chip=spec, mode=args.mode,
                     **({"trace": args.trace} if args.mode == "timing" and args.trace else {}))
    shape = " ".join(f"{k}={v}" for k, v in problem.items())
    print(f"npusim run: {entry.title} {shape} on {spec.name}, {args.mode} mode")
    print("\n".join(time_lines(res, spec)))
    if res.trace is not None:
        print(res.trace.summary().to_text(8))
        if args.out and getattr(res.trace, "level", "full") == "summary":
            print("no trace.json / gantt.png: --trace summary keeps no instruction rows")
        elif args.out:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            print(f"wrote {res.trace.to_chrome_json(out / 'trace.json')}, "
                  f"{res.trace.plot_gantt(out / 'gantt.png', max_cores=2, title=f'{entry.title} on {spec.name}')}")
    return 0


def _cmd_check(args) -> int:
    from npusim.chip import chip as get_chip
    from npusim.sanitizer import sanitizing

    entry, problem = problem_of(args)
    spec = get_chip(args.chip)
    with sanitizing() as found:  # every launch of the call runs sanitized (docs/sanitizer.md)
        res = entry.call(problem, chip=spec, mode="timing")
    shape = " ".join(f"{k}={v}" for k, v in problem.items())
    launches = f" in {found.launches} launches" if found.launches > 1 else ""
    print(f"npusim check: {entry.title} {shape} on {spec.name}: {res.cycles:,} cycles, "
          f"{found.instructions:,} instructions checked{launches}")
    print(found.summary())
    return 1 if len(found) else 0


def _cmd_demo(args) -> int:
    from npusim.demo import run_demo

    return run_demo(Path(args.out), chip=args.chip, mode=args.mode, case=args.case)


def _operator_keys() -> str:
    from npusim.predict import usage

    return usage()


def build_parser() -> argparse.ArgumentParser:
    from npusim.demo import demo_cases
    from npusim.predict import __doc__ as predict_doc

    raw = argparse.RawDescriptionHelpFormatter
    p = argparse.ArgumentParser(prog="npusim", description="Ascend AI Core simulator")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run a demo case: summary, Chrome trace, Gantt figure")
    d.add_argument("--out", default="out/demo",
                   help="directory for trace.json, trace.csv and gantt.png, created after a successful run "
                        "(default %(default)s)")
    d.add_argument("--chip", default="Ascend910B2", help=CHIP_HELP)
    d.add_argument("--mode", default="full", choices=["full", "timing"],
                   help="full: data and timing (default); timing: the same instruction stream without data")
    cases = demo_cases()
    d.add_argument("--case", default="pfa", choices=list(cases),
                   help="; ".join(f"{name}: {case.title}" for name, case in cases.items()) + " (default %(default)s)")
    d.set_defaults(func=_cmd_demo)
    pr = sub.add_parser("predict", help="estimate mode: predicted time, AI Core timeout verdict and split advice",
                        description=predict_doc, epilog=_operator_keys(), formatter_class=raw)
    add_problem_args(pr)
    pr.set_defaults(func=_cmd_predict)
    r = sub.add_parser("run", help="run an operator problem in timing or estimate mode: time and trace summary",
                       epilog=_operator_keys(), formatter_class=raw)
    add_problem_args(r)
    r.add_argument("--chip", default="Ascend910B2", help=CHIP_HELP)
    r.add_argument("--mode", default="timing", choices=["timing", "estimate"],
                   help="timing: every instruction simulated, no data (default); estimate: work counted, the "
                        "slowest core sampled")
    r.add_argument("--out", default=None, help="directory for trace.json and gantt.png (timing mode; default: none)")
    r.add_argument("--trace", default=None, metavar="LEVEL",
                   help="timing mode's trace level: full, summary (memory flat in the run's length), none, or "
                        "file:PATH (every row streamed to a Parquet file for `npusim plot`); default: every row up "
                        "to 10M, then the summary")
    r.set_defaults(func=_cmd_run)
    ck = sub.add_parser("check", help="run an operator problem sanitized (timing mode): missing flags and barriers, "
                                      "races, bad accesses (docs/sanitizer.md); exit status 1 on any report",
                        epilog=_operator_keys(), formatter_class=raw)
    add_problem_args(ck)
    ck.add_argument("--chip", default="Ascend910B2", help=CHIP_HELP)
    ck.set_defaults(func=_cmd_check)
    c = sub.add_parser("chips", help="list the chip presets")
    c.set_defaults(func=_cmd_chips)
    pl = sub.add_parser("plot", help="Gantt figure of a trace written by npusim (Chrome JSON, or the Parquet "
                                     "file of trace='file:PATH')")
    pl.add_argument("trace", help="trace.json written by npusim demo / run or Trace.to_chrome_json, or a "
                                  "trace='file:PATH' Parquet file")
    pl.add_argument("--out", default=None, help="the PNG to write (default: the trace's name with .png)")
    pl.add_argument("--max-cores", type=int, default=8, help="AI Cores drawn, from core 0 (default %(default)s)")
    pl.set_defaults(func=_cmd_plot)
    from npusim.sweep.cli import add_parser as add_sweep

    add_sweep(sub)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except AclnnError as e:
        print(f"npusim: error {e}", file=sys.stderr)
        return 2
    except NpusimError as e:
        print(f"npusim: simulation error: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
