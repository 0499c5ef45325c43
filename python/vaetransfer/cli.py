"""Command line: ``vaetransfer <command> ...`` (one entry point for every job)."""
from __future__ import annotations

import argparse
import json
import sys


def _quickstart(args) -> int:
    from .experiments import quickstart

    quickstart.run(args.out, seed=args.seed, steps=args.steps, n=args.n, similarity_n=args.similarity_n,
                   progress=not args.quiet)
    return 0


def _train(args) -> int:
    from .train import train_main

    return train_main(args.rest)


def _info(args) -> int:
    from . import build_info

    print(json.dumps(build_info(), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vaetransfer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("quickstart", help="generate the built-in data sets and write a first report")
    p.add_argument("--out", default="runs/quickstart", help="output directory (default: runs/quickstart)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=1500, help="training steps of each quickstart model (default 1500)")
    p.add_argument("--n", type=int, default=16384, help="dSprites images the models train on (0: all)")
    p.add_argument("--similarity-n", type=int, default=1000, help="images the CKA/Procrustes heatmaps use")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=_quickstart)

    # Options are parsed by vaetransfer.train.train_main (`vaetransfer train --help`).
    p = sub.add_parser("train", help="train a VAE; a half-finished run resumes", add_help=False)
    p.set_defaults(func=_train, forwards=True)

    p = sub.add_parser("info", help="print how the compiled core was built")
    p.set_defaults(func=_info)

    args, rest = parser.parse_known_args(argv)
    if rest and not getattr(args, "forwards", False):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
