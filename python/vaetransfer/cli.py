"""Command line: ``vaetransfer <command> ...`` (one entry point for every job)."""
from __future__ import annotations

import argparse
import json
import sys

from ._C import ArgumentError, ArgumentTypeError


def _run(args) -> int:
    from . import experiments

    if args.list:
        for name in experiments.available():
            study = experiments.get(name)
            print(f"{name}  (presets: {', '.join(study.PRESETS)})\n    {experiments.describe(study)}")
        return 0
    if not args.study or not args.out:
        args.parser.error("expected a study and --out DIR (or --list)")
    experiments.run_study(args.study, args.out, preset=args.preset, config_file=args.config, sets=args.set,
                          progress=not args.quiet)
    return 0


def _quickstart(args) -> int:
    from . import experiments

    sets = [f"{key}={value}" for key, value in (("seed", args.seed), ("steps", args.steps), ("n", args.n),
                                                ("similarity_n", args.similarity_n)) if value is not None]
    experiments.run_study("quickstart", args.out, preset="small", sets=sets, progress=not args.quiet)
    return 0


def _train(args) -> int:
    from .train import train_main

    return train_main(args.rest)


def _sweep(args) -> int:
    from .sweep import main as sweep_main

    return sweep_main(args.rest)


def _info(args) -> int:
    from . import build_info

    print(json.dumps(build_info(), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vaetransfer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run a study (vaetransfer run --list); a re-run resumes",
                       description="Runs a study into --out: results.json, figures and index.md. The config is the "
                                   "preset, then --config's values, then each --set; a re-run with the same config "
                                   "resumes, another config needs another --out.")
    p.add_argument("study", nargs="?", help="the study (a module of vaetransfer.experiments)")
    p.add_argument("--list", action="store_true", help="list the studies and their presets")
    p.add_argument("--preset", default="small", help="smoke (seconds), small (default; a laptop) or paper")
    p.add_argument("--config", metavar="FILE.json", help="a JSON object of config values over the preset")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one config value (dotted keys for nested configs; JSON values, e.g. betas=[1,4])")
    p.add_argument("--out", metavar="DIR", help="output directory")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=_run, parser=p)

    p = sub.add_parser("quickstart", help="the quickstart study, preset small (= run quickstart --preset small)")
    p.add_argument("--out", default="runs/quickstart", help="output directory (default: runs/quickstart)")
    p.add_argument("--seed", type=int, default=None, help="= --set seed=...")
    p.add_argument("--steps", type=int, default=None, help="= --set steps=... (training steps of each model)")
    p.add_argument("--n", type=int, default=None, help="= --set n=... (dSprites images to train on; 0: all)")
    p.add_argument("--similarity-n", type=int, default=None, help="= --set similarity_n=... (images of the heatmaps)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=_quickstart)

    # Options are parsed by vaetransfer.train.train_main (`vaetransfer train --help`).
    p = sub.add_parser("train", help="train a VAE; a half-finished run resumes", add_help=False)
    p.set_defaults(func=_train, forwards=True)

    # Options are parsed by vaetransfer.sweep.main (`vaetransfer sweep --help`).
    p = sub.add_parser("sweep", help="run a sweep of many runs (local processes or Ray); status; results",
                       add_help=False)
    p.set_defaults(func=_sweep, forwards=True)

    p = sub.add_parser("info", help="print how the compiled core was built")
    p.set_defaults(func=_info)

    args, rest = parser.parse_known_args(argv)
    if rest and not getattr(args, "forwards", False):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    try:
        return args.func(args)
    except (ArgumentError, ArgumentTypeError) as exc:  # bad input: the message, no traceback
        print(f"vaetransfer {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
