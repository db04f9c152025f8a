"""The ``npusim`` command: demo, predict, check (the sanitizer), chips, plot."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from npusim.errors import AclnnError, NpusimError


def _cmd_chips(args) -> int:
    from npusim.chip import chips_table

    print(chips_table())
    return 0


def _cmd_plot(args) -> int:
    from npusim.trace import Trace

    trace = Trace.from_chrome_json(args.trace)
    out = Path(args.out or Path(args.trace).with_suffix(".png"))
    trace.plot_gantt(out, max_cores=args.max_cores)
    print(f"wrote {out}")
    return 0


def _cmd_predict(args) -> int:
    from npusim.predict import predict, report

    print(report(predict(args.op, args.params)))
    return 0


def _cmd_check(args) -> int:
    from npusim.predict import predict
    from npusim.sanitizer import sanitizing

    with sanitizing() as found:
        res = predict(args.op, args.params, mode="timing")
    print(f"{args.op}: {res.cycles:,} cycles, {len(res.trace):,} instructions checked")
    print(found.summary())
    return 1 if len(found) else 0


def _cmd_demo(args) -> int:
    from npusim.demo import run_demo

    return run_demo(Path(args.out), chip=args.chip, mode=args.mode, case=args.case)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="npusim", description="Ascend AI Core simulator")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run the main demo case: summary, Chrome trace, Gantt figure")
    d.add_argument("--out", default="out/demo", help="output directory (default out/demo)")
    d.add_argument("--chip", default="Ascend910B2")
    d.add_argument("--mode", default="full", choices=["full", "timing"])
    d.add_argument("--case", default="pfa", choices=["pfa", "matmul"],
                   help="pfa: PromptFlashAttentionV2 (default); matmul: the tiled matmul reference kernel")
    d.set_defaults(func=_cmd_demo)
    pr = sub.add_parser("predict", help="estimate mode: predicted time, AI Core timeout verdict and split advice",
                        description=__import__("npusim.predict", fromlist=["x"]).__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    pr.add_argument("op", choices=["pfa", "fa", "spkc"])
    pr.add_argument("params", nargs="*", help="KEY=VALUE shape parameters, e.g. B=1 N=20 S=2097152 D=256 N_kv=1")
    pr.set_defaults(func=_cmd_predict)
    ck = sub.add_parser("check", help="run an operator's kernel sanitized in timing mode: missing flags, races, "
                                      "bad accesses (docs/sanitizer.md); exit status 1 if anything is reported",
                        description="Shape keys as for `npusim predict` (below).\n\n"
                                    + __import__("npusim.predict", fromlist=["x"]).__doc__,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    ck.add_argument("op", choices=["pfa", "fa", "spkc"])
    ck.add_argument("params", nargs="*", help="KEY=VALUE shape parameters, e.g. B=1 N=2 S=1024 D=128 sparse_mode=2")
    ck.set_defaults(func=_cmd_check)
    c = sub.add_parser("chips", help="list the chip presets")
    c.set_defaults(func=_cmd_chips)
    pl = sub.add_parser("plot", help="Gantt figure of a Chrome trace JSON written by npusim")
    pl.add_argument("trace")
    pl.add_argument("--out", default=None)
    pl.add_argument("--max-cores", type=int, default=8)
    pl.set_defaults(func=_cmd_plot)
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
