"""The ``npusim sweep`` subcommand: ``npusim sweep STUDY.toml`` runs a study, ``npusim sweep report
RESULTS.parquet`` reports on its results, ``npusim sweep space OP KEY=VALUE...`` lists a tiling space."""
from __future__ import annotations

import argparse

USAGE = """npusim sweep STUDY.toml [--scheduler tcp://host:port] [--workers N] [--out RESULTS.parquet]
       npusim sweep report RESULTS.parquet [--out DIR] [--top N] [--heatmap AXIS,AXIS]
       npusim sweep space OP KEY=VALUE... [--chip NAME]"""


def add_parser(sub) -> None:
    """Register ``sweep`` on the npusim command's subparsers."""
    from npusim import sweep as pkg

    p = sub.add_parser("sweep", help="design study over tilings and chip variants (study file -> Parquet -> report)",
                       usage=USAGE, description=pkg.study.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", nargs="+", help="STUDY.toml | report RESULTS.parquet | space OP KEY=VALUE...")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address, e.g. tcp://10.0.0.5:8786")
    p.add_argument("--workers", type=int, default=None, help="local processes (default: usable CPUs)")
    p.add_argument("--out", default=None, help="results file (run) or report directory (report)")
    p.add_argument("--top", type=int, default=10, help="report: points per case in the ranking")
    p.add_argument("--heatmap", default=None, help="report: the two tiling axes of the heatmap, A,B")
    p.add_argument("--chip", default="Ascend910B2", help="space: the chip")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError

    head, rest = args.target[0], args.target[1:]
    if head == "report":
        from npusim.sweep.report import report

        if len(rest) != 1:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, "sweep report: give one RESULTS.parquet")
        pair = tuple(args.heatmap.split(",")) if args.heatmap else None
        rep = report(rest[0], args.out, top=args.top, heatmap=pair)
        print(rep.verdict)
        print("wrote " + ", ".join(str(f) for f in rep.files))
        return 0
    if head == "space":
        return _space(rest, args.chip)
    if rest:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"sweep: one study file, got {' '.join(args.target)}")
    from npusim.sweep import load_study, sweep

    study = load_study(head)
    df = sweep(study, scheduler=args.scheduler, workers=args.workers, output=args.out, progress=not args.quiet)
    counts = df["status"].value_counts().to_dict()
    print(f"{len(df)} points ({', '.join(f'{v} {k}' for k, v in counts.items())}) -> {args.out or study.output}")
    return 0


def _space(rest: list[str], chip_name: str) -> int:
    from npusim import registry
    from npusim.chip import chip
    from npusim.errors import ACLNN_ERR_PARAM_INVALID, AclnnError
    from npusim.sweep.study import Study

    if not rest:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, "sweep space: name an operator")
    problem = {}
    for kv in rest[1:]:
        k, sep, v = kv.partition("=")
        if not sep:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"sweep space: parameters are KEY=VALUE, got {kv!r}")
        problem[k] = int(v) if v.lstrip("-").isdigit() else v
    (_, full), = Study(operator=rest[0], problems=[problem]).problem_dicts()
    space_of = registry.get(rest[0]).tiling_space
    if space_of is None:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"sweep space: {rest[0]} publishes no tiling space")
    print(space_of(full, chip(chip_name)).describe())
    return 0
